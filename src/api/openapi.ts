/**
 * The OpenAPI 3.1 document, generated from the route table and its zod schemas (`z.toJSONSchema`,
 * JSON Schema 2020-12, which is OpenAPI 3.1's dialect). Named schemas become components; the error
 * answers every route can give are added from what the route parses.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { PROJECT_ROOT } from '../config/environment.ts';
import { type ApiRoute, BODY_LIMIT } from './route.ts';
import { requestSchemas, responseSchemas } from './schemas.ts';

type Json = Record<string, unknown>;
type Registry = typeof requestSchemas;
type Io = 'input' | 'output';

const COMPONENTS = '#/components/schemas/';
const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: `${COMPONENTS}Error` } } },
});

/** `$schema` and `$id` belong to standalone documents, not to schemas embedded in OpenAPI. */
function embedded(schema: Json): Json {
  const { $schema: _s, $id: _i, ...rest } = schema;
  return rest;
}

function components(registry: Registry, io: Io): Record<string, Json> {
  const { schemas } = z.toJSONSchema(registry, { io, uri: (id) => `${COMPONENTS}${id}` });
  return Object.fromEntries(Object.entries(schemas).map(([id, s]) => [id, embedded(s as Json)]));
}

function schemaOf(schema: z.ZodType, registry: Registry, io: Io): Json {
  const id = registry.get(schema)?.id;
  return id ? { $ref: `${COMPONENTS}${id}` } : embedded(z.toJSONSchema(schema, { io }) as Json);
}

function parameters(schema: z.ZodType | undefined, where: 'path' | 'query' | 'header'): Json[] {
  if (!schema) return [];
  const json = z.toJSONSchema(schema, { io: 'input' }) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, { description, ...s }]) => ({
    name,
    in: where,
    required: where === 'path' || (json.required ?? []).includes(name),
    ...(description ? { description } : {}),
    schema: s,
  }));
}

function operation(r: ApiRoute): Json {
  const responses: Json = {};
  for (const [status, doc] of Object.entries(r.responses)) {
    responses[status] = {
      description: doc.description,
      ...(doc.schema
        ? { content: { [doc.contentType ?? 'application/json']: { schema: schemaOf(doc.schema, responseSchemas, 'output') } } }
        : {}),
    };
  }
  const implied: [boolean, number, string][] = [
    [Boolean(r.params || r.query || r.body), 400, 'Invalid input; `issues` lists the failing fields.'],
    [!r.open, 401, 'An API key is required and none, or an unknown or revoked one, was sent (`WWW-Authenticate: Bearer`).'],
    [Boolean(r.params), 404, 'No such run or step (a run of another tenant is answered the same).'],
    [Boolean(r.body), 413, `The body is larger than ${(r.bodyLimit ?? BODY_LIMIT) / 1_048_576} MiB.`],
    [Boolean(r.body), 415, 'The body is not application/json.'],
    [
      true,
      403,
      'Refused while the server listens on loopback: a Host that is not a loopback name, or a state-changing request sent by a page of another site.',
    ],
    [true, 500, 'An error of the server; the message is generic.'],
    [r.path.startsWith('/api/'), 503, "The database cannot be reached; try again after the Retry-After header's seconds."],
  ];
  for (const [applies, status, description] of implied) {
    if (applies && !(status in responses)) responses[status] = errorResponse(description);
  }
  return {
    operationId: r.operationId,
    summary: r.summary,
    ...(r.open ? { security: [] } : {}),
    ...(r.params || r.query || r.headers
      ? { parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query'), ...parameters(r.headers, 'header')] }
      : {}),
    ...(r.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: schemaOf(r.body, requestSchemas, 'input') } } } }
      : {}),
    responses,
  };
}

function packageVersion(): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

export function openApiDocument(routes: readonly ApiRoute[]): Json {
  const paths: Record<string, Json> = {};
  for (const r of routes) (paths[r.path] ??= {})[r.method.toLowerCase()] = operation(r);
  return {
    openapi: '3.1.0',
    info: {
      title: 'durable-agent',
      version: packageVersion(),
      description:
        'A durable runtime for LLM agents: runs, their checkpointed steps, and cancellation. ' + 'Errors are {"error":{"code","message"}}.',
    },
    paths,
    // Every operation needs the key unless it says `security: []`; a server with no key yet lets them in without one.
    security: [{ apiKey: [] }],
    components: {
      schemas: { ...components(requestSchemas, 'input'), ...components(responseSchemas, 'output') },
      securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'An API key (dak_…) from `durable-agent keys create`.' } },
    },
  };
}
