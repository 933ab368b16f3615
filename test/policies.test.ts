/**
 * The `openai` and `replay` policies. The openai policy talks to a scripted OpenAI-compatible
 * server on 127.0.0.1 that checks what it receives; on a real mutation task from the corpus it
 * survives a 429 and a 500, works the task through the real tools (a malformed tool call among
 * them) and the submission is graded in a fresh container. The replay policy then runs that
 * trajectory again and reports exactly the steps whose observations differ.
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { readRows } from '../datasets/reader.js';
import { TOOL_SPECS } from '../pipeline/agent/agent_env.js';
import { openaiPolicy, type RetryInfo } from '../pipeline/agent/policies/openai.js';
import { compareObservations, defaultNormalize, replayBudgets, replayPolicy } from '../pipeline/agent/policies/replay.js';
import { type ChatMessage, hunksOf } from '../pipeline/agent/policy.js';
import { type Budgets, rollout } from '../pipeline/agent/rollout.js';
import type { TaskRecord } from '../schemas/tasks.js';
import type { TrajectoryRecord } from '../schemas/trajectories.js';
import { gradeEnvs, runEnvFor, TEST_LIMITS } from './fixtures/rollout_env.js';
import { call, completion, error, type Reply, type ScriptedMessage, ScriptedServer, type SeenRequest } from './fixtures/scripted_openai.js';
import { cli, tempDir } from './helpers.js';

const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

// ---------------------------------------------------------------------------------------------

describe('the openai policy against a scripted server (client path)', () => {
  const servers: ScriptedServer[] = [];
  const serve = async (script: (i: number, req: SeenRequest) => Reply) => {
    const s = new ScriptedServer(script);
    servers.push(s);
    return { server: s, baseURL: await s.start() };
  };
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  it('sends the conversation in the API format with the tools, sampling and headers, and passes malformed tool calls through', async () => {
    const { server, baseURL } = await serve((i) =>
      completion(
        i,
        {
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'edit', arguments: '{"path": "a.py", "search": ' } },
            { type: 'function', function: { name: 'rm_rf', arguments: '{}' } },
            { id: 'c3', type: 'function', function: { name: 'view', arguments: '{"path": "a.py"}' } },
          ],
        },
        { prompt_tokens: 321, completion_tokens: 45 },
      ),
    );
    const policy = openaiPolicy({
      baseURL,
      model: 'qwen-coder',
      apiKey: 'sk-test',
      temperature: 0.7,
      topP: 0.95,
      maxTokens: 2048,
      seed: 11,
      headers: { 'x-team': 'worldline' },
      extraBody: { top_k: 20 },
      maxRetries: 0,
    });
    expect(policy).toMatchObject({ name: 'openai', model: 'qwen-coder' });
    const messages: ChatMessage[] = [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'fix it' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'a1', name: 'bash', arguments: '{"command": "ls"}' },
          { id: 'a2', name: 'view', arguments: 'not json' },
        ],
      },
      { role: 'tool', content: 'README\n', name: 'bash', tool_call_id: 'a1' },
      { role: 'tool', content: 'error: bad', name: 'view', tool_call_id: 'a2' },
      { role: 'assistant', content: 'thinking aloud' },
      { role: 'user', content: 'No tool was called.' },
    ];
    const turn = await policy.next(messages);
    expect(server.requests).toHaveLength(1);
    const req = server.requests[0];
    expect(req.headers.authorization).toBe('Bearer sk-test');
    expect(req.headers['x-team']).toBe('worldline');
    expect(req.body).toMatchObject({ model: 'qwen-coder', tool_choice: 'auto', temperature: 0.7, top_p: 0.95, max_tokens: 2048, seed: 11, top_k: 20 });
    expect(req.body.tools).toEqual(JSON.parse(JSON.stringify(TOOL_SPECS)));
    expect(req.body.messages).toEqual([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'fix it' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'a1', type: 'function', function: { name: 'bash', arguments: '{"command": "ls"}' } },
          { id: 'a2', type: 'function', function: { name: 'view', arguments: 'not json' } },
        ],
      },
      { role: 'tool', content: 'README\n', tool_call_id: 'a1' },
      { role: 'tool', content: 'error: bad', tool_call_id: 'a2' },
      { role: 'assistant', content: 'thinking aloud' },
      { role: 'user', content: 'No tool was called.' },
    ]);
    // Verbatim, broken ones included; a call without an id gets one so its observation pairs up.
    expect(turn).toEqual({
      content: '',
      toolCalls: [
        { id: 'c1', name: 'edit', arguments: '{"path": "a.py", "search": ' },
        { id: 'call_1_1', name: 'rm_rf', arguments: '{}' },
        { id: 'c3', name: 'view', arguments: '{"path": "a.py"}' },
      ],
      promptTokens: 321,
      completionTokens: 45,
    });
  });

  it('retries a dropped connection, 429 and 5xx, waiting what retry-after or retry-after-ms asks, else backing off, then answers', async () => {
    const script: Reply[] = [
      { hangUp: true },
      error(429, 'slow down', { 'retry-after': '0' }),
      error(503, 'overloaded', { 'retry-after-ms': '10' }),
      error(502, 'bad gateway', { 'retry-after-ms': '10', 'retry-after': '9' }),
    ];
    const { server, baseURL } = await serve(
      (i) => script[i] ?? completion(i, { content: 'done', tool_calls: [call('s1', 'submit', {})] }, { prompt_tokens: 10, completion_tokens: 2 }),
    );
    const retries: RetryInfo[] = [];
    const policy = openaiPolicy({ baseURL, model: 'm', apiKey: 'k', maxRetries: 5, onRetry: (r) => retries.push(r) });
    const turn = await policy.next([{ role: 'user', content: 'go' }]);
    expect(turn).toMatchObject({ content: 'done', toolCalls: [{ id: 's1', name: 'submit', arguments: '{}' }], promptTokens: 10, completionTokens: 2 });
    expect(server.requests).toHaveLength(5);
    // Every retry is the same request.
    for (const r of server.requests) expect(r.body).toEqual(server.requests[0].body);
    expect(retries.map((r) => [r.attempt, r.status])).toEqual([
      [0, null],
      [1, 429],
      [2, 503],
      [3, 502],
    ]);
    // No header: the client's backoff, at least 375 ms for the first retry (0.5 s less up to 25 % jitter).
    expect(retries[0].delayMs).toBeGreaterThanOrEqual(370);
    // A header: the wait the server asked for, shorter than any backoff; retry-after-ms wins over retry-after.
    for (const r of retries.slice(1)) expect(r.delayMs).toBeLessThan(375);
    expect(retries[2].delayMs).toBeGreaterThanOrEqual(9);
    expect(policy.stats()).toEqual({ requests: 5, retries: 4, completions: 1 });
  });

  it('gives up after maxRetries, and at once on errors that are not worth retrying', async () => {
    const down = await serve(() => error(500, 'always broken', { 'retry-after-ms': '10' }));
    const downRetries: RetryInfo[] = [];
    const p1 = openaiPolicy({ baseURL: down.baseURL, model: 'm', maxRetries: 2, onRetry: (r) => downRetries.push(r) });
    await expect(p1.next([{ role: 'user', content: 'go' }])).rejects.toThrow(/failed after 3 tries \(HTTP 500\)/);
    expect(down.server.requests).toHaveLength(3);
    expect(downRetries).toHaveLength(2);

    const bad = await serve(() => error(400, 'tools are not supported by this model'));
    const p2 = openaiPolicy({ baseURL: bad.baseURL, model: 'm', maxRetries: 5 });
    await expect(p2.next([{ role: 'user', content: 'go' }])).rejects.toThrow(/failed after 1 try \(HTTP 400\).*tools are not supported/);
    expect(bad.server.requests).toHaveLength(1);

    // Nothing listens there any more: connection errors are retried with growing backoff, then reported.
    const gone = await serve(() => error(500, 'x'));
    await gone.server.close();
    const retries: RetryInfo[] = [];
    const p3 = openaiPolicy({ baseURL: gone.baseURL, model: 'm', maxRetries: 2, onRetry: (r) => retries.push(r) });
    await expect(p3.next([{ role: 'user', content: 'go' }])).rejects.toThrow(/failed after 3 tries: Connection error/);
    expect(retries.map((r) => r.status)).toEqual([null, null]);
    expect(retries[1].delayMs).toBeGreaterThan(retries[0].delayMs);

    // A request that outlives timeoutMs is a connection timeout, retried like one.
    const slow = await serve(() => ({ stall: true }));
    const p4 = openaiPolicy({ baseURL: slow.baseURL, model: 'm', maxRetries: 1, timeoutMs: 200 });
    await expect(p4.next([{ role: 'user', content: 'go' }])).rejects.toThrow(/failed after 2 tries: Request timed out/);
    expect(slow.server.requests).toHaveLength(2);
  });
});

// ---------------------------------------------------------------------------------------------

describe('the replay policy (comparison logic)', () => {
  const recording = (observations: string[]): TrajectoryRecord => ({
    trajectory_id: 't.openai.x',
    task_id: 't',
    kind: 'mutation_fix',
    repo: 'r',
    policy: 'openai',
    model: 'm',
    messages: [
      { role: 'system', content: 's', name: null, tool_call_id: null, tool_calls: [] },
      { role: 'user', content: 'u', name: null, tool_call_id: null, tool_calls: [] },
      ...observations.flatMap((o, i) => [
        {
          role: 'assistant',
          content: `turn ${i}`,
          name: null,
          tool_call_id: null,
          tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: `step ${i}` }) } }],
        },
        { role: 'tool', content: o, name: 'bash', tool_call_id: `c${i}`, tool_calls: [] },
      ]),
    ],
    steps: observations.map((o, i) => ({ action: `bash ${JSON.stringify({ command: `step ${i}` })}`, observation: o, exit_code: 0, duration_seconds: 0.1 })),
    submission: null,
    resolved: false,
    reward: 0,
    exit_status: 'max_turns',
    turns: observations.length,
    prompt_tokens: 5,
    completion_tokens: 5,
    wall_seconds: 1,
    max_turns: 7,
    max_tokens: 100,
    max_wall_seconds: 60,
    image_id: 'sha256:img',
    tool_versions: 'worldline 0.1.0; agent_tools 000000000000',
    seed: 0,
    replay_of: null,
    replay_exact: null,
    replay_diffs: [],
  });

  it('replays assistant turns verbatim, compares the observations it sees, and stops at the first difference when asked', async () => {
    const rec = recording(['1 failed in 0.52s', 'obj at 0x7f3a2b1c9d00', 'same']);
    expect(replayBudgets(rec)).toEqual({ maxTurns: 7, maxTokens: 100, maxWallS: 60 });
    const p = replayPolicy(rec);
    expect(p).toMatchObject({ name: 'replay', model: 'm' });
    const convo: ChatMessage[] = [
      { role: 'system', content: 's' },
      { role: 'user', content: 'u' },
    ];
    const t0 = await p.next(convo);
    expect(t0).toEqual({ content: 'turn 0', toolCalls: [{ id: 'c0', name: 'bash', arguments: '{"command":"step 0"}' }], promptTokens: 0, completionTokens: 0 });
    convo.push({ role: 'assistant', content: t0.content, tool_calls: t0.toolCalls }, { role: 'tool', content: '1 failed in 0.07s', tool_call_id: 'c0' });
    const t1 = await p.next(convo);
    convo.push({ role: 'assistant', content: t1.content, tool_calls: t1.toolCalls }, { role: 'tool', content: 'obj at 0x7f00000000aa', tool_call_id: 'c1' });
    const t2 = await p.next(convo);
    // Timings and addresses are masked; nothing differs yet, and the third observation is not in yet.
    expect(p.differences()).toEqual([]);
    expect(p.progress()).toEqual({ turns: 3, recordedTurns: 3 });
    convo.push({ role: 'assistant', content: t2.content, tool_calls: t2.toolCalls }, { role: 'tool', content: 'other', tool_call_id: 'c2' });
    await expect(p.next(convo)).rejects.toThrow(/no more assistant turns/);
    expect(p.differences()).toEqual([{ step: 2, action: 'bash {"command":"step 2"}', recorded: 'same', observed: 'other' }]);
    // With a finished record, missing steps count too.
    const finished = { steps: [{ action: '', observation: '1 failed in 9s', exit_code: 1, duration_seconds: 0 }] };
    expect(p.differences(finished).map((d) => [d.step, d.observed])).toEqual([
      [1, null],
      [2, null],
    ]);
    expect(
      replayPolicy(rec, { normalize: null })
        .differences(finished)
        .map((d) => d.step),
    ).toEqual([0, 1, 2]);

    const strict = replayPolicy(rec, { stopAtFirstDifference: true });
    const c: ChatMessage[] = [{ role: 'user', content: 'u' }];
    const s0 = await strict.next(c);
    c.push({ role: 'assistant', content: s0.content, tool_calls: s0.toolCalls }, { role: 'tool', content: 'something else', tool_call_id: 'c0' });
    await expect(strict.next(c)).rejects.toThrow(/diverged at step 0 \(bash \{"command":"step 0"\}\)/);
    expect(compareObservations(rec.steps, ['1 failed in 1.00s', 'obj at 0xabcdef12', 'same', 'extra'], defaultNormalize)).toEqual([
      { step: 3, action: '', recorded: null, observed: 'extra' },
    ]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('openai and replay policies on a real mutation task, through the real tools', () => {
  let out: string;
  let task: TaskRecord;
  const limits = TEST_LIMITS;
  const runEnv = runEnvFor(false);
  const budgets: Budgets = { maxTurns: 20, maxTokens: 1_000_000, maxWallS: 600 };
  const gradeEnv = gradeEnvs(() => out, false, 'grade-policies');
  let recorded: TrajectoryRecord;
  const servers: ScriptedServer[] = [];

  beforeAll(async () => {
    const dir = tempDir('policies');
    out = join(dir, 'out');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo: join(inject('corpusRoot'), 'h11') }) + '\n');
    const res = await cli([
      'run',
      '--manifest',
      manifest,
      '--out',
      out,
      '--validate-runs',
      '1',
      '--policy',
      'none',
      '--mutations-per-unit',
      '1',
      '--mutation-tries',
      '30',
    ]);
    expect(res.code, res.stderr).toBe(0);
    const tasks: TaskRecord[] = [];
    for await (const row of readRows(join(out, 'dataset'), { config: 'tasks' })) tasks.push(row as unknown as TaskRecord);
    expect(tasks).toHaveLength(1);
    task = tasks[0];
  }, 900_000);

  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  it('the openai policy survives a 429 and a 500, turns a malformed call into an error observation, and resolves the task', async () => {
    const hunks = hunksOf(task.patch);
    expect(hunks.length).toBeGreaterThan(0);
    const file = hunks[0].path;
    const firstLine = Number(/^@@ -(\d+)/m.exec(task.patch)![1]);
    const runTests = `python3 -m pytest -q -p no:cacheprovider ${task.FAIL_TO_PASS.slice(0, 3).map(shq).join(' ')}`;
    const malformed = `{"path": ${JSON.stringify(file)}, "search": "def `;
    const turns: ScriptedMessage[] = [
      { content: 'Let me reproduce the failure first.', tool_calls: [call('call_run1', 'bash', { command: runTests })] },
      {
        content: null,
        tool_calls: [
          { id: 'call_bad', type: 'function', function: { name: 'edit', arguments: malformed } },
          call('call_view', 'view', { path: file, start: Math.max(1, firstLine - 5), end: firstLine + 25 }),
        ],
      },
      ...hunks.map((h, i) => ({
        content: `Restore the code in ${h.path} (${i + 1}/${hunks.length}).`,
        tool_calls: [call(`call_edit${i}`, 'edit', { path: h.path, search: h.search, replace: h.replace })],
      })),
      { content: 'Rerun the tests.', tool_calls: [call('call_run2', 'bash', { command: runTests })] },
      { content: 'They pass; submitting.', tool_calls: [call('call_submit', 'submit', {})] },
    ];
    const usage = (k: number) => ({ prompt_tokens: 1000 + 100 * k, completion_tokens: 20 + k });
    const failures: Reply[] = [error(429, 'Rate limit reached', { 'retry-after': '0' }), error(500, 'The server had an error', { 'retry-after-ms': '10' })];
    const server = new ScriptedServer((i) =>
      i < failures.length
        ? failures[i]
        : i - failures.length < turns.length
          ? completion(i, turns[i - failures.length], usage(i - failures.length))
          : error(400, 'the script is over'),
    );
    servers.push(server);
    const baseURL = await server.start();
    const retries: RetryInfo[] = [];
    const policy = openaiPolicy({
      baseURL,
      model: 'scripted-coder',
      apiKey: 'test-key',
      temperature: 0.2,
      topP: 0.9,
      maxTokens: 4096,
      maxRetries: 3,
      timeoutMs: 30_000,
      onRetry: (r) => retries.push(r),
    });

    const traj = await rollout(task, policy, budgets, limits, runEnv, gradeEnv());
    recorded = traj;

    // The server: two failures, then one request per turn, each carrying the tools and the conversation so far.
    expect(server.requests).toHaveLength(failures.length + turns.length);
    expect(retries.map((r) => r.status)).toEqual([429, 500]);
    // Both waits are the server's (retry-after: 0, retry-after-ms: 10), shorter than any backoff.
    expect(retries[0].delayMs).toBeLessThan(375);
    expect(retries[1].delayMs).toBeGreaterThanOrEqual(9);
    expect(retries[1].delayMs).toBeLessThan(375);
    expect(policy.stats()).toEqual({ requests: failures.length + turns.length, retries: 2, completions: turns.length });
    expect(server.requests[1].body).toEqual(server.requests[0].body);
    expect(server.requests[2].body).toEqual(server.requests[0].body);
    const toolMessages = traj.messages.filter((m) => m.role === 'tool');
    const expectedConversation: unknown[] = [
      { role: 'system', content: traj.messages[0].content },
      { role: 'user', content: task.problem_statement },
    ];
    let toolIndex = 0;
    for (const [k, t] of turns.entries()) {
      const req = server.requests[failures.length + k];
      expect(req.url).toBe('/v1/chat/completions');
      expect(req.headers.authorization).toBe('Bearer test-key');
      expect(req.body).toMatchObject({ model: 'scripted-coder', tool_choice: 'auto', temperature: 0.2, top_p: 0.9, max_tokens: 4096 });
      expect(req.body.tools).toEqual(JSON.parse(JSON.stringify(TOOL_SPECS)));
      expect(req.body.messages, `request for turn ${k}`).toEqual(expectedConversation);
      expectedConversation.push({ role: 'assistant', content: t.content, tool_calls: t.tool_calls });
      for (const tc of t.tool_calls!) expectedConversation.push({ role: 'tool', content: toolMessages[toolIndex++].content, tool_call_id: tc.id });
    }

    // The trajectory: resolved in a fresh container, everything recorded verbatim.
    expect(traj).toMatchObject({
      policy: 'openai',
      model: 'scripted-coder',
      task_id: task.instance_id,
      exit_status: 'submitted',
      resolved: true,
      reward: 1,
      turns: turns.length,
    });
    expect(traj.prompt_tokens).toBe(turns.reduce((s, _, k) => s + usage(k).prompt_tokens, 0));
    expect(traj.completion_tokens).toBe(turns.reduce((s, _, k) => s + usage(k).completion_tokens, 0));
    const assistants = traj.messages.filter((m) => m.role === 'assistant');
    expect(assistants.map((m) => ({ content: m.content, tool_calls: m.tool_calls }))).toEqual(
      turns.map((t) => ({ content: t.content ?? '', tool_calls: t.tool_calls })),
    );
    const calls = turns.flatMap((t) => t.tool_calls!);
    expect(toolMessages.map((m) => [m.tool_call_id, m.name])).toEqual(calls.map((c) => [c.id, c.function.name]));
    expect(traj.steps.map((s) => s.action)).toEqual(calls.map((c) => `${c.function.name} ${c.function.arguments}`));
    expect(traj.steps.map((s) => s.observation)).toEqual(toolMessages.map((m) => m.content));
    // The malformed call became an error observation; the episode went on.
    const bad = toolMessages.find((m) => m.tool_call_id === 'call_bad')!;
    expect(bad.content).toMatch(/^error: the arguments of edit are not valid JSON/);
    expect(traj.steps[1]).toMatchObject({ action: `edit ${malformed}`, exit_code: null });
    expect(traj.steps[0].exit_code).not.toBe(0);
    expect(traj.steps[0].observation).toContain('failed');
    expect(traj.steps[2].observation).toContain(`${firstLine}  `);
    for (let i = 0; i < hunks.length; i++) expect(traj.steps[3 + i].observation).toBe(`edited ${hunks[i].path}`);
    expect(traj.steps.at(-2)!.exit_code).toBe(0);
    expect(traj.steps.at(-1)!.observation).toBe('submitted');
    expect(traj.submission).toMatch(/^diff --git /);
  }, 300_000);

  it('a faithful replay reproduces every observation; a tampered recording and a different task state are reported by step', async () => {
    expect(recorded, 'needs the openai trajectory').toBeDefined();
    const h = hunksOf(task.patch).length;

    // Faithful: the same actions through fresh tools give the same observations (timings masked).
    const faithful = replayPolicy(recorded);
    const again = await rollout(task, faithful, replayBudgets(recorded), limits, runEnv, gradeEnv());
    expect(again).toMatchObject({ policy: 'replay', model: 'scripted-coder', resolved: true, exit_status: 'submitted', turns: recorded.turns });
    expect(again.steps.map((s) => s.action)).toEqual(recorded.steps.map((s) => s.action));
    expect(faithful.differences(again)).toEqual([]);
    expect(faithful.differences()).toEqual([]);

    // A tampered recorded observation: reported at its step, and the replay stops there when asked.
    const tamperedStep = 2;
    const tampered: TrajectoryRecord = structuredClone(recorded);
    tampered.steps[tamperedStep].observation = 'tampered';
    const strict = replayPolicy(tampered, { stopAtFirstDifference: true });
    const stopped = await rollout(task, strict, replayBudgets(tampered), limits, runEnv, gradeEnv());
    expect(stopped.exit_status).toBe('error');
    expect(stopped.messages.at(-1)!.content).toMatch(new RegExp(`diverged at step ${tamperedStep}`));
    expect(strict.differences()).toEqual([
      { step: tamperedStep, action: recorded.steps[tamperedStep].action, recorded: 'tampered', observed: recorded.steps[tamperedStep].observation },
    ]);
    // Everything after the stop is missing from the replay.
    expect(strict.differences(stopped).map((d) => [d.step, d.observed === null])).toEqual(
      recorded.steps
        .map((_, i) => i)
        .filter((i) => i >= tamperedStep)
        .map((i) => [i, i > tamperedStep]),
    );

    // A different task state (the code before the mutation): the tests pass at once, the viewed
    // lines differ, the gold edit finds nothing to replace, and there is nothing to submit.
    const original: TaskRecord = { ...task, bug_patch: '' };
    const other = replayPolicy(recorded);
    const diverged = await rollout(original, other, replayBudgets(recorded), limits, runEnv, gradeEnv());
    const diffs = other.differences(diverged);
    expect(diffs.map((d) => d.step)).toEqual([0, 2, ...Array.from({ length: h }, (_, i) => 3 + i), 4 + h]);
    expect(diffs[0]).toMatchObject({ action: recorded.steps[0].action, recorded: recorded.steps[0].observation });
    expect(diffs[0].observed).toMatch(/passed/);
    expect(diffs.at(-1)).toMatchObject({ recorded: 'submitted', observed: 'submitted (no changes)' });
    for (const d of diffs.slice(2, 2 + h)) expect(d.observed).toMatch(/^error: search text found 0 times/);
  }, 300_000);
});
