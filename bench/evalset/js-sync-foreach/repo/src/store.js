'use strict';
// An in-memory store with the remote store's asynchronous interface.

class MemoryStore {
  constructor({ delayMs = 5, failOn = null } = {}) {
    this.items = new Map();
    this.delayMs = delayMs;
    this.failOn = failOn;
  }

  async put(id, value) {
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    if (id === this.failOn) throw new Error(`store refused ${id}`);
    this.items.set(id, value);
  }

  get size() {
    return this.items.size;
  }
}

module.exports = { MemoryStore };
