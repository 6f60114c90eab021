'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { main } = require('../src/cli');

const quiet = () => {};

test('defaults', () => {
  assert.strictEqual(main([], quiet), 0);
});

test('a port on the command line', () => {
  assert.strictEqual(main(['--port', '8080'], quiet), 0);
});

test('a host and a port', () => {
  assert.strictEqual(main(['--host', '0.0.0.0', '--port', '9000'], quiet), 0);
});

test('a bad port is refused', () => {
  assert.strictEqual(main(['--port', '99999'], quiet), 2);
});
