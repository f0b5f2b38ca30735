/** The local runner has no library surface; see main.ts. */
export {};
