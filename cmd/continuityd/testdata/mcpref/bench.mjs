// The harness of BenchmarkMCPStdioVsReference (cmd/continuityd/bench_test.go):
// the official TypeScript MCP client (@modelcontextprotocol/sdk's Client and
// StdioClientTransport, the versions package-lock.json pins) against two
// servers on stdio, interleaved: `continuityd mcp` and the reference memory
// server (@modelcontextprotocol/server-memory).
//
//   node bench.mjs '<config JSON>'
//
// config: {"ours": {"command", "args", "env"}, "oursDirect": the same for
// the other way to start ours (start-up, and calls beside the two others'),
// "floor": {"command", "args", "envSize"}, the least a stdio server can do
// (calls only, answering ours' tool names; the variable envSize names is
// set to the size its tool answers must have: our resume's),
// "floorDurable": the same with "env" besides (the floor that syncs a
// checkpoint's request to disk before answering, as ours does),
// "memoryDir", "rounds", "startups", "calls"}. Prints one JSON line per round: every sample, in
// milliseconds, and the answers' sizes; the Go benchmark takes the medians.
//
// What is timed, the same for both servers:
//   startup: Client.connect() on a new StdioClientTransport: the spawn, the
//     initialize request and its answer, the initialized notification sent.
//   write:   one tools/call that stores something, request sent to answer
//     parsed: ours `checkpoint` (focus and next action), theirs
//     `add_observations` (the same two strings, to one entity).
//   read:    ours `resume` (peek), theirs `open_nodes` of one entity seeded
//     so its answer is as long as our resume's.
// Each session lists its tools first (as MCP clients do; not timed), and
// the first call of each tool in a session is a warm-up, not counted.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

const cfg = JSON.parse(process.argv[2]);
const memoryServer = createRequire(import.meta.url).resolve("@modelcontextprotocol/server-memory/dist/index.js");

// Two sentences of about the length an agent writes in a checkpoint.
const focusOf = (i) => `measure MCP over stdio against the reference memory server, call ${i}: start-up, a write and a read`;
const nextOf = (i) => `compare the medians of several interleaved rounds and write them in docs/PERFORMANCE.md (${i})`;

function server(name, command, args, env) {
  return { name, command, args, env: { ...getDefaultEnvironment(), ...env } };
}

async function connect(s) {
  const client = new Client({ name: "mcpref-bench", version: "1" });
  const transport = new StdioClientTransport({ command: s.command, args: s.args, env: s.env, stderr: "inherit" });
  const t0 = performance.now();
  await client.connect(transport);
  return { client, ms: performance.now() - t0 };
}

async function timed(client, name, args) {
  const t0 = performance.now();
  const r = await client.callTool({ name, arguments: args });
  const ms = performance.now() - t0;
  if (r.isError) {
    throw new Error(`${name}: ${JSON.stringify(r.content)}`);
  }
  return { ms, size: JSON.stringify(r).length };
}

// ours: the write and the read of continuityd's tools.
const ours = {
  write: (c, i) => timed(c, "checkpoint", { focus: focusOf(i), working_state: { next_action: nextOf(i) } }),
  read: (c) => timed(c, "resume", { peek: true }),
};
// theirs: the memory server's; the entity "work" takes the writes and
// "state" is what is read.
const theirs = {
  write: (c, i) => timed(c, "add_observations", { observations: [{ entityName: "work", contents: [focusOf(i), nextOf(i)] }] }),
  read: (c) => timed(c, "open_nodes", { names: ["state"] }),
};

// seed writes the memory server's file: "work" empty, and "state" with as
// many observations as make open_nodes' answer (text and structured
// content, as our resume's) at least size characters long.
function seed(file, size) {
  const state = { name: "state", entityType: "task", observations: [] };
  const answer = () => {
    const g = { entities: [state], relations: [] };
    return JSON.stringify({ content: [{ type: "text", text: JSON.stringify(g, null, 2) }], structuredContent: g }).length;
  };
  while (answer() < size) {
    state.observations.push(`observation ${state.observations.length}: ${nextOf(state.observations.length)}`);
  }
  const lines = [
    { type: "entity", name: "work", entityType: "task", observations: [] },
    { type: "entity", ...state },
  ];
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n"));
}

const oursServer = server("ours", cfg.ours.command, cfg.ours.args, cfg.ours.env);
const directServer = cfg.oursDirect && server("direct", cfg.oursDirect.command, cfg.oursDirect.args, cfg.oursDirect.env);

// Our resume's size, read once before the rounds, sets the size of theirs.
let resumeSize;
{
  const { client } = await connect(oursServer);
  await ours.write(client, 0);
  resumeSize = (await ours.read(client)).size;
  await client.close();
}

const floorServer = cfg.floor && server("floor", cfg.floor.command, cfg.floor.args, { [cfg.floor.envSize]: String(resumeSize) });
const durableServer = cfg.floorDurable && server("durable", cfg.floorDurable.command, cfg.floorDurable.args,
  { ...cfg.floorDurable.env, [cfg.floorDurable.envSize]: String(resumeSize) });

let callNo = 1;
for (let round = 0; round < cfg.rounds; round++) {
  const file = path.join(cfg.memoryDir, `memory-${round}.jsonl`);
  seed(file, resumeSize);
  const theirsServer = server("theirs", process.execPath, [memoryServer], { MEMORY_FILE_PATH: file });
  // Who goes first alternates by round, and by call within a round.
  const pair = round % 2 === 0 ? [["ours", oursServer], ["theirs", theirsServer]] : [["theirs", theirsServer], ["ours", oursServer]];
  const out = {
    round,
    startup: { ours: [], theirs: [], direct: [] },
    write: { ours: [], theirs: [], direct: [], floor: [], durable: [] },
    read: { ours: [], theirs: [], direct: [], floor: [], durable: [] },
    size: {},
  };
  const players = directServer ? [...pair, ["direct", directServer]] : pair;
  for (let i = 0; i < cfg.startups; i++) {
    for (const [who, s] of i % 2 === 0 ? players : [...players].reverse()) {
      const { client, ms } = await connect(s);
      out.startup[who].push(ms);
      await client.close();
    }
  }
  const sessions = {};
  const floors = [floorServer && ["floor", floorServer], durableServer && ["durable", durableServer]].filter(Boolean);
  const callers = [...players, ...floors];
  for (const [who, s] of callers) {
    const { client } = await connect(s);
    await client.listTools();
    const ops = who === "theirs" ? theirs : ours;
    await ops.write(client, callNo++);
    await ops.read(client);
    sessions[who] = { client, ops };
  }
  for (const kind of ["write", "read"]) {
    for (let i = 0; i < cfg.calls; i++) {
      const n = callNo++;
      for (const [who] of i % 2 === 0 ? callers : [...callers].reverse()) {
        const r = await sessions[who].ops[kind](sessions[who].client, n);
        out[kind][who].push(r.ms);
        out.size[`${kind}_${who}`] = r.size;
      }
    }
  }
  for (const who of Object.keys(sessions)) {
    await sessions[who].client.close();
  }
  console.log(JSON.stringify(out));
}
