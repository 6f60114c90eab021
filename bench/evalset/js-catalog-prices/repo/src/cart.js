'use strict';
// A cart is a list of SKUs, one entry per item.

function total(skus, products) {
  return skus.reduce((sum, sku) => {
    const product = products[sku];
    if (!product) throw new Error(`unknown sku ${sku}`);
    return sum + product.price;
  }, 0);
}

function receipt(skus, products) {
  const lines = skus.map((sku) => `${products[sku].name}: ${products[sku].price}`);
  lines.push(`total: ${total(skus, products).toFixed(2)}`);
  return lines.join('\n');
}

module.exports = { total, receipt };
