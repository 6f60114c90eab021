'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { parse, compare } = require('../src/version');

test('parts compare as numbers', () => {
  assert.ok(compare(parse('2.0.0'), parse('10.0.0')) < 0);
  assert.ok(compare(parse('1.0.10'), parse('1.0.9')) > 0);
  assert.strictEqual(compare(parse('v1.2.3'), parse('1.2.3')), 0);
});
