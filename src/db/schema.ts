/**
 * Where the project's tables live: one PostgreSQL schema (`durable_agent` unless DATABASE_SCHEMA says
 * otherwise), so the user's `public` is never touched.
 *
 * Every statement in the sources names its tables in full, `durable_agent.run`, so it works whatever
 * the connection's search_path is (a pooler in transaction mode included) and reads as what it does.
 * For another schema the connections of `createPool` rewrite that prefix once per distinct statement
 * text; for the default one they send the text as written. Migrations are the exception: their files
 * name tables bare and run with the schema as the transaction's search_path.
 */
import pg from 'pg';

export const DEFAULT_SCHEMA = 'durable_agent';
const PREFIX = `${DEFAULT_SCHEMA}.`;

/** `text` with its tables in `schema` instead of the default one. */
export function inSchema(text: string, schema: string): string {
  return schema === DEFAULT_SCHEMA ? text : text.replaceAll(PREFIX, `${pg.escapeIdentifier(schema)}.`);
}

/**
 * A pg Client class whose statements name `schema`'s tables. Named (prepared) statements keep their
 * names with the schema appended, so a statement is never confused with another schema's version.
 */
export function clientForSchema(schema: string): typeof pg.Client {
  if (schema === DEFAULT_SCHEMA) return pg.Client;
  const rewritten = new Map<string, string>();
  const rewrite = (text: string) => {
    let r = rewritten.get(text);
    if (r === undefined) rewritten.set(text, (r = inSchema(text, schema)));
    return r;
  };
  class SchemaClient extends pg.Client {
    // pg's overloads are many; every form is a string, a config object, or a Submittable (left alone).
    override query(config: any, values?: any, callback?: any): any {
      if (typeof config === 'string') config = rewrite(config);
      else if (config && typeof config.text === 'string' && typeof config.submit !== 'function') {
        config = { ...config, text: rewrite(config.text), ...(config.name ? { name: `${config.name}__${schema}` } : {}) };
      }
      return super.query(config, values, callback);
    }
  }
  return SchemaClient;
}
