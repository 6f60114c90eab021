'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { loadConfig } = require('../src/config');

test('the port is a number', () => {
  assert.strictEqual(loadConfig(['--port', '8080']).port, 8080);
  assert.throws(() => loadConfig(['--port', 'http']), /invalid port/);
  assert.throws(() => loadConfig(['--port', '80.5']), /invalid port/);
});
