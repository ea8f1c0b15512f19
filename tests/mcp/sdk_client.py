"""A real MCP client (the official Python SDK, `mcp` on PyPI) against `densefeed mcp`.

    sdk_client.py DENSEFEED_EXE PROJECT WORK_DIR

Connects over stdio, initializes, lists the tools, submits the two CP
precision experiments (experiments/cp-affine-chain-tf32.yaml and -tf32x3.yaml)
as YAML text into a ledger under WORK_DIR, starts a worker through the
run_queue tool, reads both verdicts (tf32 red, tf32x3 green), lists the
resources and reads the skill, then sends malformed requests and shows the
server still answers. Prints what it saw; exits 1 on the first mismatch.
Works with the SDK's 1.x (camelCase fields) and 2.x (snake_case) models.
"""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # 2.x
    from mcp.shared.exceptions import MCPError as ProtocolError
except ImportError:  # 1.x
    from mcp.shared.exceptions import McpError as ProtocolError


def field(obj, *names):
    """The first of `names` the SDK's model has (1.x camelCase, 2.x snake_case)."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise AttributeError(f"{type(obj).__name__} has none of {names}")


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}", flush=True)
        sys.exit(1)


def structured(result):
    return field(result, "structured_content", "structuredContent")


def is_error(result):
    return bool(field(result, "is_error", "isError"))


def server_args(root: Path, ledger: Path) -> list:
    """densefeed's own project, its gates as checked out (not as its main branch has them)."""
    return ["--project", str(root), "--trust-worktree", "mcp", "--ledger", str(ledger)]


def server_env() -> dict:
    """PATH with the build's bin folder first: the gates name the bundled harnesses bare."""
    return {"PATH": os.pathsep.join([os.path.dirname(os.path.abspath(sys.argv[1])), os.environ.get("PATH", "")])}


async def run(exe: str, root: Path, work: Path) -> None:
    ledger = work / "ledger.db"
    params = StdioServerParameters(command=exe, args=server_args(root, ledger), env=server_env())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            version = field(init, "protocol_version", "protocolVersion")
            server = field(init, "server_info", "serverInfo")
            print(f"initialize: protocol {version}, server {server.name}", flush=True)
            check(version == "2025-11-25", f"protocol version {version}")

            tools = [t.name for t in (await session.list_tools()).tools]
            print(f"tools/list: {', '.join(tools)}", flush=True)
            for name in ("submit_experiment", "get_status", "list_gates", "show_gate", "compare_tensors",
                         "analyze_trace", "ledger_list", "ledger_show", "run_queue"):
                check(name in tools, f"tool {name} missing")

            ids = {}
            for name in ("cp-affine-chain-tf32", "cp-affine-chain-tf32x3"):
                text = (root / "experiments" / f"{name}.yaml").read_text()
                result = await session.call_tool("submit_experiment", {"manifest": text})
                check(not is_error(result), f"submit {name}: {result.content[0].text}")
                ids[name] = structured(result)["experiment_id"]
                print(f"submit_experiment {name}: experiment {ids[name]} queued", flush=True)

            result = await session.call_tool("run_queue", {})
            check(not is_error(result), f"run_queue: {result.content[0].text}")
            print(f"run_queue: {structured(result)}", flush=True)

            verdicts = {}
            for name, experiment_id in ids.items():
                result = await session.call_tool("get_status", {"experiment_id": experiment_id, "wait_s": 1500})
                check(not is_error(result), f"get_status {name}: {result.content[0].text}")
                doc = structured(result)
                verdicts[name] = doc["gate_verdict"]
                bench = doc["stages"]["bench"]
                print(f"get_status {name}: state {doc['state']}, gate {doc['gate_verdict']}, "
                      f"{len(doc['stages']['gate']['failing_cases'])} failing case(s), bench {bench['status']}"
                      + "".join(f" [{c['case']}: {c['verdict']} {c['speedup']:.3f}x]" for c in bench["cases"]), flush=True)
                if doc["next"]:
                    print(f"  next: {doc['next'][0]['kind']}: {doc['next'][0]['suggestion']}", flush=True)
            check(verdicts["cp-affine-chain-tf32"] == "red", f"tf32 verdict {verdicts['cp-affine-chain-tf32']}")
            check(verdicts["cp-affine-chain-tf32x3"] == "green", f"tf32x3 verdict {verdicts['cp-affine-chain-tf32x3']}")

            resources = (await session.list_resources()).resources
            uris = [str(r.uri) for r in resources]
            print(f"resources/list: {len(uris)} resources, e.g. {uris[:3]}", flush=True)
            skill = "densefeed://skills/densefeed-optimization-loop/SKILL.md"
            check(skill in uris, "the skill is not a resource")
            check("densefeed://gates/cp-affine-chain.yaml" in uris, "the gate is not a resource")
            contents = (await session.read_resource(skill)).contents
            text = contents[0].text
            check(text.startswith("---\nname: densefeed-optimization-loop"), "the skill's front matter")
            print(f"resources/read {skill}: {len(text)} characters, first line {text.splitlines()[1]!r}", flush=True)

            # Malformed requests: errors, and the session goes on.
            try:
                await session.call_tool("no_such_tool", {})
                check(False, "an unknown tool was accepted")
            except ProtocolError as e:
                error = getattr(e, "error", None)
                code = getattr(error, "code", None)
                print(f"tools/call no_such_tool: protocol error {code}: {e}", flush=True)
                check(code == -32602, f"unknown tool error code {code}")
            result = await session.call_tool("get_status", {"experiment_id": "one"})
            check(is_error(result), "wrong argument type accepted")
            print(f"tools/call get_status with experiment_id 'one': tool error: {result.content[0].text[:160]}", flush=True)
            await session.send_ping()
            check(len((await session.list_tools()).tools) == len(tools), "tools/list after the malformed requests")
            print("after the malformed requests: ping and tools/list still answered", flush=True)

    # Bytes that are not JSON at all, which the SDK would never send: a raw session.
    server = subprocess.Popen([exe, *server_args(root, ledger)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, **server_env()})
    out, _ = server.communicate('{this is not json\n{"jsonrpc":"2.0","id":1,"method":"ping"}\n', timeout=60)
    lines = [json.loads(line) for line in out.splitlines()]
    print(f"raw: '{{this is not json' -> error {lines[0]['error']['code']}; then ping -> {lines[1].get('result')}", flush=True)
    check(lines[0]["error"]["code"] == -32700 and lines[1]["result"] == {} and server.returncode == 0, "raw session")


def main() -> None:
    exe, root, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    asyncio.run(run(exe, root, work))
    print("OK", flush=True)


if __name__ == "__main__":
    main()
