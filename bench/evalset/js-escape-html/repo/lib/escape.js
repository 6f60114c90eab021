'use strict';
// Text made safe to put inside HTML elements and attribute values.

function escapeHtml(text) {
  return String(text)
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
}

module.exports = { escapeHtml };
