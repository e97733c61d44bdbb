/**
 * What `f` returns, or a promise rejected with what it throws: a caller chaining on the result (its
 * cleanup in a `finally`, its errors in a `catch`) sees a throw as the rejection an async function
 * would have made of it.
 */
export function promised<T>(f: () => Promise<T>): Promise<T> {
  try {
    return f();
  } catch (error) {
    return Promise.reject(error);
  }
}
