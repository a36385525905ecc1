/* SPDX-License-Identifier: MIT */
/*
 * The PKCS#11 module under test, loaded as an application loads one: dlopen
 * and C_GetFunctionList (shared by the token tests and token_mp_helper).
 */
#ifndef TU_P11_H
#define TU_P11_H

#include <dlfcn.h>
#include <stdio.h>

#include <p11-kit/pkcs11.h>

/* The module at path and its function list into *ret_f; the handle for
 * dlsym and dlclose, or NULL after a line on stderr saying why. */
static inline void *tu_p11_load(const char *path, CK_FUNCTION_LIST **ret_f)
{
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CK_C_GetFunctionList getfl;

	if (!dl) {
		fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
		return NULL;
	}
	*(void **)&getfl = dlsym(dl, "C_GetFunctionList");
	if (!getfl || getfl(ret_f) != CKR_OK || !*ret_f) {
		fprintf(stderr, "%s: no function list from C_GetFunctionList\n", path);
		dlclose(dl);
		return NULL;
	}
	return dl;
}

#endif
