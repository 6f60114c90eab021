'use strict';

function formatLine(level, message, json) {
  if (json) return JSON.stringify({ level, message });
  return `[${level.toUpperCase()}] ${message}`;
}

module.exports = { formatLine };
