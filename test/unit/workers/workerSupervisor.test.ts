/**
 * WorkerSupervisor, on a small worker (test/fixtures/workers/taskWorker.mjs): FIFO results, a crash, an
 * exit or a time-out fails the running task with the spec's error and the next task gets a fresh worker,
 * a worker that cannot start fails one waiting task at a time, aborts, a message that cannot be cloned,
 * and close.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { WorkerSupervisor, type WorkerSupervisorSpec } from "../../../src/workers/WorkerSupervisor.ts";

type Task = { op: "echo" | "hang" | "throw" | "exit" | "grow"; value?: unknown };
type Reply = { id: number; value: unknown; threadId: number };
type Result = { value: unknown; threadId: number };

const WORKER_URL = new URL("../../fixtures/workers/taskWorker.mjs", import.meta.url);

/** An error that says which failure made it. */
class Failure extends Error {
  constructor(
    readonly kind: string,
    message = kind,
  ) {
    super(message);
  }
}

function supervisor(
  overrides: Partial<WorkerSupervisorSpec<Task, Reply, Result>> = {},
): WorkerSupervisor<Task, Reply, Result> {
  return new WorkerSupervisor<Task, Reply, Result>({
    url: WORKER_URL,
    options: { execArgv: [], stdout: false, stderr: false },
    timeoutMs: 10_000,
    message: (task, id) => ({ id, ...task }),
    result: ({ value, threadId }) => {
      if (value === "refuse") throw new Failure("refused");
      return { value, threadId };
    },
    timeoutError: (task) => new Failure("timeout", `${task.op} took too long`),
    crashError: (error, task) =>
      new Failure(
        error.code === "ERR_WORKER_OUT_OF_MEMORY" ? "memory" : "crash",
        `${task?.op ?? "no task"}: ${error.message}`,
      ),
    exitError: () => new Failure("exit"),
    closedError: () => new Failure("closed"),
    postError: (_error, task) => new Failure("post", `cannot post ${task.op}`),
    ...overrides,
  });
}

function failure(kind: string, message?: RegExp): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof Failure, String(error));
    assert.equal(error.kind, kind);
    if (message) assert.match(error.message, message);
    return true;
  };
}

describe("WorkerSupervisor", () => {
  it("runs tasks in FIFO order on one worker, and the spec's result can refuse a reply", async () => {
    const workers = supervisor();
    try {
      const results = await Promise.all([1, 2, 3].map((value) => workers.run({ op: "echo", value })));
      assert.deepEqual(
        results.map((result) => result.value),
        [1, 2, 3],
      );
      assert.equal(new Set(results.map((result) => result.threadId)).size, 1);
      await assert.rejects(workers.run({ op: "echo", value: "refuse" }), failure("refused"));
      assert.equal((await workers.run({ op: "echo", value: 4 })).threadId, results[0]!.threadId);
    } finally {
      await workers.close();
    }
  });

  it("fails the running task when its worker crashes; queued tasks go on on a fresh worker", async () => {
    const workers = supervisor();
    try {
      const first = await workers.run({ op: "echo", value: "before" });
      const crashed = workers.run({ op: "throw" });
      const queued = workers.run({ op: "echo", value: "after" });
      await assert.rejects(crashed, failure("crash", /^throw: task \d+ raised$/));
      const after = await queued;
      assert.equal(after.value, "after");
      assert.notEqual(after.threadId, first.threadId);
    } finally {
      await workers.close();
    }
  });

  it("fails the running task when its worker exits, and the next task works", async () => {
    const workers = supervisor();
    try {
      await assert.rejects(workers.run({ op: "exit" }), failure("exit"));
      assert.equal((await workers.run({ op: "echo", value: 1 })).value, 1);
    } finally {
      await workers.close();
    }
  });

  it("rejects a task past timeoutMs, terminates its stuck worker and starts a fresh one", async () => {
    const workers = supervisor({ timeoutMs: 200 });
    try {
      const stuck = workers.run({ op: "hang" });
      const next = workers.run({ op: "echo", value: "next" });
      await assert.rejects(stuck, failure("timeout", /^hang took too long$/));
      assert.equal((await next).value, "next");
    } finally {
      await workers.close();
    }
  });

  it("tells a worker past its heap limit apart (ERR_WORKER_OUT_OF_MEMORY)", async () => {
    const workers = supervisor({
      options: { execArgv: [], stdout: false, stderr: false, resourceLimits: { maxOldGenerationSizeMb: 32 } },
    });
    try {
      await assert.rejects(workers.run({ op: "grow" }), failure("memory", /^grow: /));
      assert.equal((await workers.run({ op: "echo", value: 1 })).value, 1);
    } finally {
      await workers.close();
    }
  });

  it("runs tasks side by side on a pool: a stuck worker does not hold up another", async () => {
    const workers = supervisor({ workers: 2, timeoutMs: 2_000 });
    try {
      let stuckEnded = false;
      const stuck = workers.run({ op: "hang" }).then(
        () => assert.fail("a hung task resolved"),
        (error) => {
          stuckEnded = true;
          return error;
        },
      );
      assert.equal((await workers.run({ op: "echo", value: "fast" })).value, "fast");
      // Order, not time: the second task answered while the stuck one was still running.
      assert.equal(stuckEnded, false);
      assert.ok(failure("timeout")(await stuck));
    } finally {
      await workers.close();
    }
  });

  it("with a handshake, posts tasks once the worker is ready", async () => {
    const workers = supervisor({
      handshake: true,
      options: { execArgv: [], workerData: { handshake: true } },
    });
    try {
      workers.warm();
      const results = await Promise.all([1, 2].map((value) => workers.run({ op: "echo", value })));
      assert.deepEqual(
        results.map((result) => result.value),
        [1, 2],
      );
    } finally {
      await workers.close();
    }
  });

  it("a worker that fails before it is ready fails the first waiting task, not the others", async () => {
    const starts = new Int32Array(new SharedArrayBuffer(4));
    const workers = supervisor({
      handshake: true,
      options: { execArgv: [], workerData: { handshake: true, failFirstStart: starts } },
    });
    try {
      const first = workers.run({ op: "echo", value: 1 });
      const second = workers.run({ op: "echo", value: 2 });
      await assert.rejects(first, failure("crash", /^no task: could not start$/));
      assert.equal((await second).value, 2);
      assert.equal(Atomics.load(starts, 0), 2);
    } finally {
      await workers.close();
    }
  });

  it("an aborted task leaves at once: queued, dropped; running, its worker ends", async () => {
    const workers = supervisor();
    try {
      const reason = new Error("client left");
      const first = await workers.run({ op: "echo", value: 0 });
      // Queued behind a hung task: dropped without touching the worker.
      const controller = new AbortController();
      const hung = new AbortController();
      const running = workers.run({ op: "hang" }, hung.signal);
      const queued = workers.run({ op: "echo", value: "queued" }, controller.signal);
      const next = workers.run({ op: "echo", value: "next" });
      controller.abort(reason);
      await assert.rejects(queued, (error) => error === reason);
      // Running: its worker is terminated and the next task gets a fresh one.
      hung.abort(reason);
      await assert.rejects(running, (error) => error === reason);
      const after = await next;
      assert.equal(after.value, "next");
      assert.notEqual(after.threadId, first.threadId);
      // Already aborted: never queued.
      await assert.rejects(
        workers.run({ op: "echo" }, AbortSignal.abort(reason)),
        (error) => error === reason,
      );
    } finally {
      await workers.close();
    }
  });

  it("a message that cannot be cloned fails its task with postError and keeps the worker", async () => {
    const workers = supervisor();
    try {
      const first = await workers.run({ op: "echo", value: 1 });
      await assert.rejects(workers.run({ op: "echo", value: () => 1 }), failure("post", /cannot post echo/));
      assert.equal((await workers.run({ op: "echo", value: 2 })).threadId, first.threadId);
    } finally {
      await workers.close();
    }
  });

  it("close rejects the running and the queued tasks with closedError", async () => {
    const workers = supervisor();
    const running = assert.rejects(workers.run({ op: "hang" }), failure("closed"));
    const queued = assert.rejects(workers.run({ op: "echo", value: 1 }), failure("closed"));
    await workers.close();
    await Promise.all([running, queued]);
  });
});
