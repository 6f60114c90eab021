'use strict';

// A sorted copy of an array of numbers; the input is left alone.
function sortedCopy(values) {
  return [...values].sort();
}

module.exports = { sortedCopy };
