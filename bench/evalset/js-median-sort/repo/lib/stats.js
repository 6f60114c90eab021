'use strict';
const { sortedCopy } = require('./sorted');

function median(values) {
  if (values.length === 0) throw new Error('median of nothing');
  const s = sortedCopy(values);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function percentile(values, p) {
  const s = sortedCopy(values);
  const i = Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1);
  return s[Math.max(0, i)];
}

module.exports = { median, percentile };
