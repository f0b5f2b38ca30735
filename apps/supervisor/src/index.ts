/** The runnable supervisor has no library surface; see main.ts. */
export {};
