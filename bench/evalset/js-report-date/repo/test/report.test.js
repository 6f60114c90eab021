'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { title, fileName } = require('../src/report');

const MARCH_5 = new Date(Date.UTC(2024, 2, 5, 12, 0, 0));

test('title', () => {
  assert.strictEqual(title(MARCH_5), 'Daily report for 2024-03-05');
});

test('file name', () => {
  assert.strictEqual(fileName(MARCH_5), 'report-2024-03-05.txt');
});
