'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { createLogger } = require('../src/logger');

function capture(config) {
  const lines = [];
  return { log: createLogger(config, (l) => lines.push(l)), lines };
}

test('info and above by default', () => {
  const { log, lines } = capture({});
  log.debug('hidden');
  log.info('shown');
  assert.deepStrictEqual(lines, ['[INFO] shown']);
});

test('the configured level filters', () => {
  const { log, lines } = capture({ log: { level: 'warn' } });
  log.info('hidden');
  log.error('boom');
  assert.deepStrictEqual(lines, ['[ERROR] boom']);
});

test('json lines', () => {
  const { log, lines } = capture({ log: { level: 'debug', json: true } });
  log.debug('x');
  assert.deepStrictEqual(lines, ['{"level":"debug","message":"x"}']);
});
