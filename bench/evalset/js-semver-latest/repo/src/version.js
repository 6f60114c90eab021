'use strict';
// Release versions: MAJOR.MINOR.PATCH, an optional leading "v".

function parse(text) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)$/.exec(text.trim());
  if (!m) throw new Error(`not a version: ${text}`);
  return { major: m[1], minor: m[2], patch: m[3], text: text.trim() };
}

// Negative, zero or positive as a is older than, the same as or newer than b.
function compare(a, b) {
  for (const part of ['major', 'minor', 'patch']) {
    if (a[part] < b[part]) return -1;
    if (a[part] > b[part]) return 1;
  }
  return 0;
}

module.exports = { parse, compare };
