'use strict';
const { escapeHtml } = require('./escape');

function card(user) {
  const title = user.title ? ` title="${escapeHtml(user.title)}"` : '';
  return `<div class="card"${title}><span class="name">${escapeHtml(user.name)}</span></div>`;
}

module.exports = { card };
