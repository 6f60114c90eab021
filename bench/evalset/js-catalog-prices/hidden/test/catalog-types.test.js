'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { parseCatalog } = require('../src/catalog');

test('prices are numbers', () => {
  const p = parseCatalog('sku,name,price\nA1,apple,1.50\n');
  assert.strictEqual(p.A1.price, 1.5);
  assert.strictEqual(typeof p.A1.price, 'number');
});
