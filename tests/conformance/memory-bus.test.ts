import { createMemoryBus } from "../../src/bus/memory-bus.js";
import { runBusSuite } from "./bus.suite.js";

runBusSuite("memory", async (options) => {
  const bus = createMemoryBus(options);
  return { bus, cleanup: () => bus.close() };
});
