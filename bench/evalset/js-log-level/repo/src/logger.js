'use strict';
const { loggerOptions } = require('./options');
const { formatLine } = require('./format');

const ORDER = ['debug', 'info', 'warn', 'error'];

function createLogger(config, write = console.log) {
  const opts = loggerOptions(config);
  const min = ORDER.indexOf(opts.level);
  const logger = {};
  for (const level of ORDER) {
    logger[level] = (message) => {
      if (ORDER.indexOf(level) >= min) write(formatLine(level, message, opts.json));
    };
  }
  return logger;
}

module.exports = { createLogger };
