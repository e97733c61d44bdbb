import fs from 'node:fs';
gc(); await import('pg'); await import('node:http'); await import('zod');
gc(); let prev = process.memoryUsage().heapUsed; const start = prev;
const order = process.argv.slice(2);
const rows = [];
for (const f of order) { await import('/work/main/dist/' + f); gc(); const now = process.memoryUsage().heapUsed; rows.push([f, ((now - prev) / 1e3).toFixed(0) + ' KB']); prev = now; }
console.log(rows.map((r) => r.join(' ')).join('\n'), '\ntotal', ((prev - start) / 1e6).toFixed(2), 'MB');
