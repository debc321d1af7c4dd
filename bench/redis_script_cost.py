#!/usr/bin/env python3
"""Instructions per run of the redis backend's Lua scripts inside redis-server.

Each script runs on Redis's one thread, so what it costs there is latency on
every hand-off and throughput for every lockd replica. Unlike timings on a
shared machine, instruction counts (valgrind's callgrind) do not depend on
what else runs: this compares the scripts of the tree with those of another
commit exactly.

For every scenario and each script version, one redis-server runs under
callgrind; the scenario's setup commands and N runs of the script are sent
over one connection; the figure is the inclusive instruction count of
evalShaCommand divided by the number of EVALSHA calls (setup commands are
not counted; each run's setup puts the keys back where the scenario starts).

Scenarios (one lock, 15 waiters of one replica already queued):
  park         a waiting call's first attempt while another owner holds it
  grant        the head waiter's attempt on the freed lock
  uncontended  a first attempt on a free lock, no queue
  release      the release of an exclusive hold
  shared       a reader's acquire and release beside --readers readers

Usage: bench/redis_script_cost.py [--base REV] [--runs N] [--readers K]
       [--scenarios "park grant ..."]
  --base REV   also measure the scripts of commit REV (default: none);
               scripts from before the queue (3 keys) run with their layout
Needs valgrind and redis-server. Prints a table, base and tree side by side.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = 'backends/redis/scripts.h'
FAR = 99999999999999  # a queue entry's lifetime end (ms) that never comes


def script_source(text, name):
    m = re.search(r'inline constexpr char %s\[\] = R"lua\((.*?)\)lua";' % name, text, re.S)
    return m.group(1) if m else ''


def with_prelude(prelude, script):
    """The script as lockd sends it (scripts.h Prelude())."""
    mark = '\n--@prelude\n'
    if mark not in script:
        return prelude + script
    at = script.index(mark)
    return script[:at + 1] + prelude + script[at + len(mark):]


def load_scripts(rev):
    if rev is None:
        text = open(os.path.join(ROOT, SCRIPTS)).read()
    else:
        text = subprocess.run(['git', '-C', ROOT, 'show', f'{rev}:{SCRIPTS}'],
                              capture_output=True, text=True, check=True).stdout
    prelude = script_source(text, 'kPrelude')
    acquire = with_prelude(prelude, script_source(text, 'kAcquireScript'))
    release = with_prelude(prelude, script_source(text, 'kReleaseScript'))
    return acquire, release, 'KEYS[4]' in acquire


def encode(*args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)


class Conn:
    def __init__(self, port):
        for _ in range(300):
            try:
                self.sock = socket.create_connection(('127.0.0.1', port))
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit(f'redis-server on port {port} did not start')
        self.f = self.sock.makefile('rb')

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.read()

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b'*':
            return [self.read() for _ in range(int(rest))]
        if kind == b'-':
            raise RuntimeError(rest.decode())
        return rest


def acquire_cmd(sha, queued, owner, tri, join, member, mode='X'):
    if not queued:  # before the queue: KEYS lock fence freed
        return ['EVALSHA', sha, 3, 'L', 'F', 'FR', owner, 10000, '', tri, 0, 'ch']
    return ['EVALSHA', sha, 5, 'L', 'F', 'FR', 'Q', 'QL', owner, 10000, '', tri, 0, 'ch',
            mode, 0, 1, member, join, 10000]


def release_cmd(sha, owner):
    return ['EVALSHA', sha, 2, 'L', 'FR', owner, '', 300000, 'ch', '', 0]


def measure(scripts, scenario, runs, readers):
    acquire, release, queued = scripts
    if scenario == 'shared' and not queued:
        return None
    port_sock = socket.socket()
    port_sock.bind(('127.0.0.1', 0))
    port = port_sock.getsockname()[1]
    port_sock.close()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'callgrind.out')
        server = subprocess.Popen(
            ['valgrind', '--tool=callgrind', f'--callgrind-out-file={out}', 'redis-server',
             '--port', str(port), '--save', '', '--appendonly', 'no', '--dir', tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c = Conn(port)
        acq = c.call('SCRIPT', 'LOAD', acquire).decode()
        rel = c.call('SCRIPT', 'LOAD', release).decode()
        for i in range(15):
            c.call('ZADD', 'Q', i + 1, f'rep|X|o{i}')
            c.call('ZADD', 'QL', FAR, f'rep|X|o{i}')
        me = 'rep|X|me'
        calls = 0
        for i in range(runs):
            if scenario == 'park':
                c.call('ZREM', 'Q', me)
                c.call('ZREM', 'QL', me)
                c.call('HSET', 'L', 'owner', 'other', 'count', 1, 'token', 5)
                cmds = [acquire_cmd(acq, queued, 'me', 'n', '1', me)]
            elif scenario == 'grant':
                c.call('DEL', 'L')
                c.call('ZADD', 'Q', 0, me)
                c.call('ZADD', 'QL', FAR, me)
                cmds = [acquire_cmd(acq, queued, 'me', 'n', '1', me)]
            elif scenario == 'uncontended':
                c.call('DEL', 'L', 'Q', 'QL')
                cmds = [acquire_cmd(acq, queued, 'me', 'n', '0', me)]
            elif scenario == 'release':
                c.call('HSET', 'L', 'owner', 'me', 'count', 1, 'token', 5)
                cmds = [release_cmd(rel, 'me')]
            else:  # shared
                if i == 0:
                    c.call('DEL', 'L', 'Q', 'QL')
                    c.call('HSET', 'L', 'kind', 'S', 'limit', 0)
                    for j in range(readers):
                        c.call('HSET', 'L', f'h:r{j}',
                               '{"t":"1795801002329061","c":1,"p":1,"e":%d}' % FAR)
                    c.call('PEXPIRE', 'L', 1000000)
                cmds = [acquire_cmd(acq, queued, 'me', 'n', '1', 'rep|S|me', 'S'),
                        release_cmd(rel, 'me')]
            for cmd in cmds:
                c.call(*cmd)
                calls += 1
        try:
            c.call('SHUTDOWN', 'NOSAVE')
        except (RuntimeError, OSError):
            pass
        server.wait()
        report = subprocess.run(['callgrind_annotate', '--inclusive=yes', out],
                                capture_output=True, text=True).stdout
    for line in report.splitlines():
        if 'evalShaCommand' in line:
            return int(line.split()[0].replace(',', '')) / calls
    sys.exit('callgrind_annotate found no evalShaCommand (redis-server without symbols?)')


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--base')
    p.add_argument('--runs', type=int, default=200)
    p.add_argument('--readers', type=int, default=12)
    p.add_argument('--scenarios', default='park grant uncontended release shared')
    a = p.parse_args()
    versions = [('tree', load_scripts(None))]
    if a.base:
        versions.insert(0, (a.base, load_scripts(a.base)))
    print('instructions per EVALSHA in redis-server (callgrind, %d runs)' % a.runs)
    print('%-12s' % 'scenario' + ''.join('%14s' % v for v, _ in versions))
    for s in a.scenarios.split():
        cells = []
        for _, scripts in versions:
            ir = measure(scripts, s, a.runs, a.readers)
            cells.append('%14s' % ('-' if ir is None else '{:,.0f}'.format(ir)))
        print('%-12s' % s + ''.join(cells), flush=True)


if __name__ == '__main__':
    main()
