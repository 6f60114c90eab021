'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { latest } = require('../src/releases');

test('the newest of a few', () => {
  assert.strictEqual(latest(['v1.2.0', 'v1.3.1', 'v1.3.0']), 'v1.3.1');
});

test('other tags are skipped', () => {
  assert.strictEqual(latest(['nightly', 'v0.1.0']), 'v0.1.0');
  assert.strictEqual(latest(['nightly']), null);
});

test('1.10 is newer than 1.9', () => {
  assert.strictEqual(latest(['v1.9.0', 'v1.10.0', 'v1.2.0']), 'v1.10.0');
});
