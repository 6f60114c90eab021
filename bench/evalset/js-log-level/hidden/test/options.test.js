'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { loggerOptions } = require('../src/options');

test('the level is read from log.level', () => {
  assert.deepStrictEqual(loggerOptions({ log: { level: 'error' } }), { level: 'error', json: false });
  assert.deepStrictEqual(loggerOptions({}), { level: 'info', json: false });
});
