import type { FastifyInstance } from 'fastify';
import { createServer } from '../../src/api/server.ts';
import type { RunDefaults } from '../../src/runs/new-run.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import type { RunRecords } from '../../src/store/run-records.ts';
import type { TestDatabase } from './db.ts';

/** The HTTP API on a test database, without auth, metrics or a database health check: what route tests need. */
export function apiServer(db: TestDatabase, defaults: RunDefaults, records: RunRecords = db.records): FastifyInstance {
  return createServer({
    store: records,
    listing: new RunListing(db.pool),
    defaults,
    checkDatabase: async () => {},
    metrics: async () => ({ contentType: 'text/plain', body: '' }),
    logger: false,
  });
}
