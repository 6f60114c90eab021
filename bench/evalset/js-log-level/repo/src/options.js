'use strict';
// Logger options from a config object ({ log: { level, json } }) with defaults.

const DEFAULTS = { level: 'info', json: false };

function loggerOptions(config = {}) {
  const log = config.log || {};
  return {
    level: log.logLevel || DEFAULTS.level,
    json: log.json ?? DEFAULTS.json,
  };
}

module.exports = { loggerOptions, DEFAULTS };
