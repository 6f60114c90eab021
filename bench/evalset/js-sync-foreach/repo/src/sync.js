'use strict';

function normalize(contact) {
  return { ...contact, email: contact.email.trim().toLowerCase() };
}

// Writes every contact to the store; resolves to how many were written.
async function syncAll(contacts, store) {
  let written = 0;
  contacts.forEach(async (contact) => {
    await store.put(contact.id, normalize(contact));
    written++;
  });
  return written;
}

module.exports = { syncAll, normalize };
