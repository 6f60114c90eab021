'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { escapeHtml } = require('../lib/escape');

test('each character escaped exactly once', () => {
  assert.strictEqual(escapeHtml('a < b & "c" > d'), 'a &lt; b &amp; &quot;c&quot; &gt; d');
  assert.strictEqual(escapeHtml('&lt;'), '&amp;lt;');
});
