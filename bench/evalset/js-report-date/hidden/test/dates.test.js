'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { isoDay } = require('../src/dates');

test('first and last months', () => {
  assert.strictEqual(isoDay(new Date(Date.UTC(2023, 0, 1))), '2023-01-01');
  assert.strictEqual(isoDay(new Date(Date.UTC(2023, 11, 31, 23, 59))), '2023-12-31');
});
