'use strict';
const { isoDay } = require('./dates');

function title(date) {
  return `Daily report for ${isoDay(date)}`;
}

function fileName(date) {
  return `report-${isoDay(date)}.txt`;
}

module.exports = { title, fileName };
