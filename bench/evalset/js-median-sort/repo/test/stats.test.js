'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { median, percentile } = require('../lib/stats');

test('median of single digits', () => {
  assert.strictEqual(median([3, 1, 2]), 2);
  assert.strictEqual(median([4, 1, 3, 2]), 2.5);
});

test('median of latencies in ms', () => {
  assert.strictEqual(median([120, 95, 1000, 87, 230]), 120);
});

test('p90', () => {
  assert.strictEqual(percentile([5, 40, 9, 100, 12, 7, 8, 30, 6, 11], 90), 40);
});
