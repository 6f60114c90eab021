'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { MemoryStore } = require('../src/store');
const { syncAll } = require('../src/sync');

test('a refused write rejects syncAll', async () => {
  const store = new MemoryStore({ failOn: 'c2' });
  await assert.rejects(syncAll([{ id: 'c1', email: 'a@b' }, { id: 'c2', email: 'c@d' }], store), /store refused c2/);
});

test('a slow store is waited for', async () => {
  const store = new MemoryStore({ delayMs: 50 });
  assert.strictEqual(await syncAll([{ id: 'x', email: 'x@y' }], store), 1);
  assert.strictEqual(store.size, 1);
});
