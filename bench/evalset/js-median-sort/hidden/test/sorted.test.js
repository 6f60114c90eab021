'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { sortedCopy } = require('../lib/sorted');

test('numeric order, input untouched', () => {
  const input = [10, 9, 100, -5, 1.5];
  assert.deepStrictEqual(sortedCopy(input), [-5, 1.5, 9, 10, 100]);
  assert.deepStrictEqual(input, [10, 9, 100, -5, 1.5]);
});
