import type { IncomingHttpHeaders } from 'node:http';

/** What the real Messages API refuses, as the fake server checks it before using its script. */

/** A refusal: the status and the API's error body. */
export interface Refusal {
  status: number;
  body: { type: 'error'; error: { type: string; message: string } };
}

const refuse = (status: number, type: string, message: string): Refusal => ({ status, body: { type: 'error', error: { type, message } } });
const invalid = (message: string): Refusal => refuse(400, 'invalid_request_error', message);

/** The API key a request carries: AnthropicClient (as SDK 1.x) sends it as `Authorization: Bearer`, older clients as x-api-key. */
export function credentialOf(headers: IncomingHttpHeaders): string | null {
  const bearer = /^Bearer (.+)$/.exec(headers.authorization ?? '')?.[1];
  const header = headers['x-api-key'];
  return bearer ?? (typeof header === 'string' && header !== '' ? header : null);
}

/** The checks the real API makes that our engine could get wrong; null when the request passes. */
export function check(
  request: { method: string; path: string; headers: IncomingHttpHeaders; body: any },
  apiKey: string | undefined,
): Refusal | null {
  if (request.method !== 'POST' || request.path.split('?')[0] !== '/v1/messages') {
    return refuse(404, 'not_found_error', `Not Found: ${request.method} ${request.path}`);
  }
  const key = credentialOf(request.headers);
  if (!key) return refuse(401, 'authentication_error', 'x-api-key or authorization header is required');
  if (apiKey !== undefined && key !== apiKey) return refuse(401, 'authentication_error', 'invalid x-api-key');
  if (!request.headers['anthropic-version']) return invalid('anthropic-version: header is required');
  const body = request.body;
  if (!body || typeof body !== 'object' || Array.isArray(body)) return invalid('The request body is not valid JSON.');
  for (const field of ['model', 'max_tokens', 'messages']) {
    if (body[field] === undefined) return invalid(`${field}: Field required`);
  }
  const messages: any[] = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return invalid('messages: at least one message is required');
  if (messages[0].role !== 'user') return invalid('messages: first message must use the "user" role');
  const blocks = (m: any): any[] => (typeof m.content === 'string' ? [] : Array.isArray(m.content) ? m.content : []);
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role !== 'user' && m.role !== 'assistant') return invalid(`messages.${i}.role: Input should be 'user' or 'assistant'`);
    if (i > 0 && messages[i - 1].role === m.role) {
      return invalid(`messages: roles must alternate between "user" and "assistant", but found multiple "${m.role}" roles in a row`);
    }
    const previousUses = new Set(
      i > 0
        ? blocks(messages[i - 1])
            .filter((b) => b.type === 'tool_use')
            .map((b) => b.id)
        : [],
    );
    const strays = blocks(m).filter((b) => b.type === 'tool_result' && !previousUses.has(b.tool_use_id));
    if (strays.length > 0) {
      return invalid(
        `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${strays.map((b) => b.tool_use_id).join(', ')}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
      );
    }
  }
  for (let i = 0; i < messages.length; i++) {
    const answered = new Set(
      blocks(messages[i + 1] ?? {})
        .filter((b) => b.type === 'tool_result')
        .map((b) => b.tool_use_id),
    );
    const open = messages[i].role === 'assistant' ? blocks(messages[i]).filter((b) => b.type === 'tool_use' && !answered.has(b.id)) : [];
    if (open.length > 0) {
      return invalid(
        `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${open.map((b) => b.id).join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
      );
    }
  }
  const marked = [
    ...(Array.isArray(body.system) ? body.system : []),
    ...(Array.isArray(body.tools) ? body.tools : []),
    ...messages.flatMap(blocks),
  ].filter((b) => b && b.cache_control != null).length;
  if (marked > 4) return invalid(`A maximum of 4 blocks with cache_control may be provided. Found ${marked}.`);
  return null;
}
