'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { MemoryStore } = require('../src/store');
const { syncAll, normalize } = require('../src/sync');

const CONTACTS = [
  { id: 'c1', email: ' Ada@Example.org ' },
  { id: 'c2', email: 'bob@example.org' },
  { id: 'c3', email: 'CAROL@example.org' },
];

test('normalize lower-cases and trims', () => {
  assert.strictEqual(normalize(CONTACTS[0]).email, 'ada@example.org');
});

test('every contact is in the store once syncAll resolves', async () => {
  const store = new MemoryStore();
  const n = await syncAll(CONTACTS, store);
  assert.strictEqual(n, 3);
  assert.strictEqual(store.size, 3);
  assert.strictEqual(store.items.get('c3').email, 'carol@example.org');
});
