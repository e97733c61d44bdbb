/** A run API on `base` as a script would call it: JSON in and out, and a wait for a run's status. */
import { waitFor } from './wait-for.ts';

export function runApi(base: string) {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const get = async (path: string) => (await (await fetch(`${base}${path}`)).json()) as Record<string, any>;
  /** The run once its status is `wanted`. */
  const status = (id: string, wanted: string, timeoutMs = 60_000) =>
    waitFor(
      `run ${id} to be ${wanted}`,
      async () => {
        const run = await get(`/api/runs/${id}`);
        return run.status === wanted ? run : null;
      },
      timeoutMs,
    );
  return { post, get, status };
}
