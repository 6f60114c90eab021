'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { card } = require('../lib/render');

test('plain name', () => {
  assert.strictEqual(card({ name: 'Ada' }), '<div class="card"><span class="name">Ada</span></div>');
});

test('markup in a name is shown, not run', () => {
  assert.strictEqual(card({ name: '<b>Bob</b>' }),
    '<div class="card"><span class="name">&lt;b&gt;Bob&lt;/b&gt;</span></div>');
});

test('quotes in a title', () => {
  assert.strictEqual(card({ name: 'C', title: 'say "hi"' }),
    '<div class="card" title="say &quot;hi&quot;"><span class="name">C</span></div>');
});

test('ampersand in a name', () => {
  assert.strictEqual(card({ name: 'Tom & Jerry' }),
    '<div class="card"><span class="name">Tom &amp; Jerry</span></div>');
});
