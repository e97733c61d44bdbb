-- Room on each page of run_step for the one update every tool call's row gets: it is written STARTED
-- and updated with its result moments later. On full pages (the default fillfactor, 100) that update
-- mostly found no room beside the row, so the new version went to another page and wrote an entry in
-- each of the table's indexes too; with room it stays on the page (a HOT update), with no index
-- writes. The price is room: steps written from now on take up to ~1.4× the pages; older pages stay
-- as they are.
ALTER TABLE run_step SET (fillfactor = 70);
