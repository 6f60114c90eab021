'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { parseCatalog } = require('../src/catalog');
const { total, receipt } = require('../src/cart');

const CSV = 'sku,name,price\nA1,apple,1.50\nB2,bread,2.25\n';

test('total of two items', () => {
  assert.strictEqual(total(['A1', 'B2'], parseCatalog(CSV)), 3.75);
});

test('receipt ends with the total', () => {
  assert.match(receipt(['A1', 'A1'], parseCatalog(CSV)), /total: 3\.00$/);
});

test('unknown sku', () => {
  assert.throws(() => total(['Z9'], parseCatalog(CSV)), /unknown sku Z9/);
});
