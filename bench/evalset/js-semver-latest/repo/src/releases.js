'use strict';
const { parse, compare } = require('./version');

// The newest of the release tags; tags that are not versions are skipped.
function latest(tags) {
  const versions = [];
  for (const tag of tags) {
    try {
      versions.push(parse(tag));
    } catch {
      // not a release tag
    }
  }
  if (versions.length === 0) return null;
  versions.sort(compare);
  return versions[versions.length - 1].text;
}

module.exports = { latest };
