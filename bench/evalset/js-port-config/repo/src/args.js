'use strict';
// `--name value` pairs into an object; a bare `--flag` is true.

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) {
      opts[a.slice(2)] = true;
    } else {
      opts[a.slice(2)] = next;
      i++;
    }
  }
  return opts;
}

module.exports = { parseArgs };
