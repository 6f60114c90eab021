'use strict';

const pad = (n) => String(n).padStart(2, '0');

// A Date as YYYY-MM-DD in UTC.
function isoDay(date) {
  return `${date.getUTCFullYear()}-${pad(date.getUTCMonth())}-${pad(date.getUTCDate())}`;
}

module.exports = { isoDay, pad };
