'use strict';
// The catalogue export: `sku,name,price` lines, a header first.

function parseCatalog(csv) {
  const products = {};
  const lines = csv.trim().split('\n').slice(1);
  for (const line of lines) {
    const [sku, name, price] = line.split(',');
    products[sku] = { sku, name, price };
  }
  return products;
}

module.exports = { parseCatalog };
