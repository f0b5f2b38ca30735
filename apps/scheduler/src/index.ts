/** The runnable scheduler has no library surface; see main.ts. */
export {};
