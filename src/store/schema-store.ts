import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { schemaSql } from '../db/schema.ts';

/**
 * A store whose statements are built once, for the schema of its options (db/schema.ts): `this.sql`
 * holds them, `this.db` is what it sends them to.
 */
export abstract class SchemaStore<Db, Sql> {
  protected readonly sql: Sql;

  protected constructor(
    protected readonly db: Db,
    statements: (schema: SchemaSql) => Sql,
    opts: SchemaOption,
  ) {
    this.sql = statements(schemaSql(opts.schema));
  }
}
