/* SPDX-License-Identifier: MIT */
/*
 * libsofttoken.so inside a process that has set an OpenSSL ENGINE as default,
 * as `openssl -engine pkcs11`, stunnel and nginx's ssl_engine do: here the
 * engine of Debian's libengine-pkcs11-openssl (libp11), set with
 * ENGINE_set_default(e, ENGINE_METHOD_ALL), which claims RSA and EC key
 * contexts. Every key operation of the token must still work: key import,
 * generation, sign and verify (ECDSA, RSA PKCS#1 v1.5 and PSS, Ed25519),
 * RSA-OAEP, wrapping a private key (PKCS#8 out and back), randomness.
 *
 * Usage: test_token_ossl_engine libsofttoken.so
 * (The engine is never asked to load a PKCS#11 module itself:
 * PKCS11_MODULE_PATH names none that exists.)
 */
#define OPENSSL_SUPPRESS_DEPRECATED /* the ENGINE API is the point of the test */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/engine.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <p11-kit/pkcs11.h>

#include "tu.h"
#include "tu_p11.h"

/* LeakSanitizer (asan-ubsan preset): libp11's engine leaks the methods it
 * makes at load (ENGINE_by_id) and when OPENSSL_cleanup removes it at exit
 * (ENGINE_remove); not the token's. libcrypto has no frame pointers: only
 * the slow unwinder sees those frames. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:ENGINE_remove\nleak:ENGINE_by_id\n";
}

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "fast_unwind_on_malloc=0";
}

static const char *module_path;
static void *dl;
static CK_FUNCTION_LIST_PTR p11;
static char *dir;
static CK_SESSION_HANDLE sess;

#define PIN "1234"
#define SO_PIN "12345678"
#define CK(call) assert_int_equal((call), CKR_OK)

static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;

static int setup(void **state)
{
	char conf[4096], *cpath;
	FILE *f;
	ENGINE *e;
	unsigned char label[32];

	(void)state;
	dir = tu_mkdtemp();
	cpath = tu_path(dir, "softtoken.conf");
	snprintf(conf, sizeof(conf), "token_dir = %s/tokens\naudit_dir = %s/audit\npbkdf2_iterations = 1000\n",
		 dir, dir);
	f = fopen(cpath, "w");
	assert_non_null(f);
	fputs(conf, f);
	fclose(f);
	setenv("SOFTTOKEN_CONF", cpath, 1);
	free(cpath);

	/* The application's ENGINE, default for everything it offers. */
	setenv("PKCS11_MODULE_PATH", "/nonexistent/softtoken-test-none.so", 1);
	e = ENGINE_by_id("pkcs11");
	if (!e) {
		fprintf(stderr, "ENGINE pkcs11 not found: install libengine-pkcs11-openssl\n");
		return -1;
	}
	if (!ENGINE_set_default(e, ENGINE_METHOD_ALL)) {
		fprintf(stderr, "ENGINE_set_default(pkcs11) failed\n");
		ENGINE_free(e);
		return -1;
	}
	ENGINE_free(e); /* the default tables keep their references */
	/* The diversion is on: OpenSSL hands EC and RSA key contexts to it. */
	e = ENGINE_get_pkey_meth_engine(EVP_PKEY_EC);
	if (!e) {
		fprintf(stderr, "the engine does not claim EC keys: the test would prove nothing\n");
		return -1;
	}
	ENGINE_finish(e);

	if (!(dl = tu_p11_load(module_path, &p11)))
		return -1;
	if (p11->C_Initialize(NULL) != CKR_OK)
		return -1;
	memset(label, ' ', sizeof(label));
	memcpy(label, "engine", 6);
	if (p11->C_InitToken(0, (CK_UTF8CHAR_PTR)SO_PIN, 8, label) != CKR_OK ||
	    p11->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess) != CKR_OK ||
	    p11->C_Login(sess, CKU_SO, (CK_UTF8CHAR_PTR)SO_PIN, 8) != CKR_OK ||
	    p11->C_InitPIN(sess, (CK_UTF8CHAR_PTR)PIN, 4) != CKR_OK || p11->C_Logout(sess) != CKR_OK ||
	    p11->C_Login(sess, CKU_USER, (CK_UTF8CHAR_PTR)PIN, 4) != CKR_OK)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (p11) {
		(void)p11->C_CloseSession(sess);
		(void)p11->C_Finalize(NULL);
	}
	if (dl)
		dlclose(dl);
	if (dir) {
		tu_rmtree(dir);
		free(dir);
	}
	return 0;
}

/* Sign data with priv, verify it with pub, and see a damaged one refused. */
static void sign_verify(CK_MECHANISM *m, CK_OBJECT_HANDLE priv, CK_OBJECT_HANDLE pub)
{
	uint8_t data[100], sig[1024];
	CK_ULONG sl = sizeof(sig);

	memset(data, 0x5a, sizeof(data));
	CK(p11->C_SignInit(sess, m, priv));
	CK(p11->C_Sign(sess, data, m->mechanism == CKM_RSA_PKCS_PSS ? 32 : sizeof(data), sig, &sl));
	CK(p11->C_VerifyInit(sess, m, pub));
	CK(p11->C_Verify(sess, data, m->mechanism == CKM_RSA_PKCS_PSS ? 32 : sizeof(data), sig, sl));
	sig[sl / 2] ^= 1;
	CK(p11->C_VerifyInit(sess, m, pub));
	assert_int_equal(p11->C_Verify(sess, data, m->mechanism == CKM_RSA_PKCS_PSS ? 32 : sizeof(data), sig, sl),
			 CKR_SIGNATURE_INVALID);
}

static void gen_ec(const uint8_t *params, size_t plen, CK_MECHANISM_TYPE gen, CK_OBJECT_HANDLE *pub,
		   CK_OBJECT_HANDLE *priv)
{
	CK_MECHANISM m = { gen, NULL, 0 };
	CK_ATTRIBUTE pt[] = { { CKA_EC_PARAMS, (void *)params, plen }, { CKA_VERIFY, &yes, 1 } };
	CK_ATTRIBUTE kt[] = { { CKA_SIGN, &yes, 1 }, { CKA_TOKEN, &no, 1 } };

	CK(p11->C_GenerateKeyPair(sess, &m, pt, 2, kt, 2, pub, priv));
}

static const uint8_t p256[] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };

static void test_ec(void **state)
{
	static const uint8_t ed[] = { 0x06, 0x03, 0x2b, 0x65, 0x70 };
	CK_OBJECT_HANDLE pub, priv;
	CK_MECHANISM m = { CKM_ECDSA_SHA256, NULL, 0 }, me = { CKM_EDDSA, NULL, 0 };

	(void)state;
	gen_ec(p256, sizeof(p256), CKM_EC_KEY_PAIR_GEN, &pub, &priv);
	sign_verify(&m, priv, pub);
	gen_ec(ed, sizeof(ed), CKM_EC_EDWARDS_KEY_PAIR_GEN, &pub, &priv);
	sign_verify(&me, priv, pub);
}

/* C_CreateObject of a known P-256 key (its public point is derived and
 * checked on import), then a signature the generated public key verifies. */
static void test_ec_import(void **state)
{
	/* RFC 6979 A.2.5: the P-256 private key */
	static const uint8_t d[] = {
		0xc9, 0xaf, 0xa9, 0xd8, 0x45, 0xba, 0x75, 0x16, 0x6b, 0x5c, 0x21, 0x57, 0x67, 0xb1, 0xd6, 0x93,
		0x4e, 0x50, 0xc3, 0xdb, 0x36, 0xe8, 0x9b, 0x12, 0x7b, 0x8a, 0x62, 0x2b, 0x12, 0x0f, 0x67, 0x21,
	};
	CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
	CK_KEY_TYPE kt = CKK_EC;
	CK_ATTRIBUTE t[] = {
		{ CKA_CLASS, &cls, sizeof(cls) }, { CKA_KEY_TYPE, &kt, sizeof(kt) },
		{ CKA_EC_PARAMS, (void *)p256, sizeof(p256) }, { CKA_VALUE, (void *)d, sizeof(d) },
		{ CKA_SIGN, &yes, 1 },
	};
	CK_OBJECT_HANDLE priv;
	uint8_t point[80], sig[64], data[32] = { 1 };
	CK_ATTRIBUTE get = { CKA_EC_POINT, point, sizeof(point) };
	CK_ULONG sl = sizeof(sig);
	CK_MECHANISM m = { CKM_ECDSA, NULL, 0 };

	(void)state;
	CK(p11->C_CreateObject(sess, t, 5, &priv));
	CK(p11->C_GetAttributeValue(sess, priv, &get, 1));
	/* RFC 6979 A.2.5: Ux = 60FED4BA255A9D31..., DER OCTET STRING of 04 || x || y */
	assert_int_equal(get.ulValueLen, 67);
	assert_int_equal(point[3], 0x60);
	assert_int_equal(point[4], 0xfe);
	CK(p11->C_SignInit(sess, &m, priv));
	CK(p11->C_Sign(sess, data, sizeof(data), sig, &sl));
	assert_int_equal(sl, 64);
}

static void test_rsa(void **state)
{
	CK_MECHANISM gen = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 };
	CK_ULONG bits = 2048;
	CK_ATTRIBUTE pt[] = { { CKA_MODULUS_BITS, &bits, sizeof(bits) }, { CKA_VERIFY, &yes, 1 },
			      { CKA_ENCRYPT, &yes, 1 } };
	CK_ATTRIBUTE kt[] = { { CKA_SIGN, &yes, 1 }, { CKA_DECRYPT, &yes, 1 }, { CKA_TOKEN, &no, 1 } };
	CK_OBJECT_HANDLE pub, priv;
	CK_MECHANISM m1 = { CKM_SHA256_RSA_PKCS, NULL, 0 };
	CK_RSA_PKCS_PSS_PARAMS pss = { CKM_SHA256, CKG_MGF1_SHA256, 32 };
	CK_MECHANISM m2 = { CKM_RSA_PKCS_PSS, &pss, sizeof(pss) };
	CK_RSA_PKCS_OAEP_PARAMS oaep = { CKM_SHA256, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, NULL, 0 };
	CK_MECHANISM m3 = { CKM_RSA_PKCS_OAEP, &oaep, sizeof(oaep) };
	uint8_t msg[40] = "the token decrypts what it encrypted", ct[256], pt2[256];
	CK_ULONG cl = sizeof(ct), pl = sizeof(pt2);

	(void)state;
	CK(p11->C_GenerateKeyPair(sess, &gen, pt, 3, kt, 3, &pub, &priv));
	sign_verify(&m1, priv, pub);
	sign_verify(&m2, priv, pub);
	CK(p11->C_EncryptInit(sess, &m3, pub));
	CK(p11->C_Encrypt(sess, msg, sizeof(msg), ct, &cl));
	CK(p11->C_DecryptInit(sess, &m3, priv));
	CK(p11->C_Decrypt(sess, ct, cl, pt2, &pl));
	assert_int_equal(pl, sizeof(msg));
	assert_memory_equal(pt2, msg, sizeof(msg));
}

/* A private key wrapped (PKCS#8 out of the key) and unwrapped (PKCS#8 in)
 * still signs for its public key. */
static void test_wrap_private(void **state)
{
	CK_MECHANISM kg = { CKM_AES_KEY_GEN, NULL, 0 }, wm = { CKM_AES_KEY_WRAP_PAD, NULL, 0 };
	CK_ULONG len = 32;
	CK_ATTRIBUTE at[] = { { CKA_VALUE_LEN, &len, sizeof(len) }, { CKA_WRAP, &yes, 1 },
			      { CKA_UNWRAP, &yes, 1 }, { CKA_TOKEN, &no, 1 } };
	CK_OBJECT_HANDLE aes, pub, priv, priv2;
	CK_MECHANISM_TYPE gm = CKM_EC_KEY_PAIR_GEN;
	CK_MECHANISM gen = { gm, NULL, 0 };
	CK_ATTRIBUTE pt[] = { { CKA_EC_PARAMS, (void *)p256, sizeof(p256) }, { CKA_VERIFY, &yes, 1 } };
	CK_ATTRIBUTE kt[] = { { CKA_SIGN, &yes, 1 }, { CKA_TOKEN, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 } };
	CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
	CK_ATTRIBUTE ut[] = { { CKA_CLASS, &cls, sizeof(cls) }, { CKA_SIGN, &yes, 1 }, { CKA_TOKEN, &no, 1 } };
	CK_MECHANISM m = { CKM_ECDSA_SHA256, NULL, 0 };
	uint8_t wrapped[512];
	CK_ULONG wl = sizeof(wrapped);

	(void)state;
	CK(p11->C_GenerateKey(sess, &kg, at, 4, &aes));
	CK(p11->C_GenerateKeyPair(sess, &gen, pt, 2, kt, 3, &pub, &priv));
	CK(p11->C_WrapKey(sess, &wm, aes, priv, wrapped, &wl));
	CK(p11->C_UnwrapKey(sess, &wm, aes, wrapped, wl, ut, 3, &priv2));
	sign_verify(&m, priv2, pub);
}

static void test_random(void **state)
{
	uint8_t a[64] = { 0 }, b[64] = { 0 }, z[64] = { 0 };

	(void)state;
	CK(p11->C_SeedRandom(sess, (CK_BYTE_PTR) "seed", 4));
	CK(p11->C_GenerateRandom(sess, a, sizeof(a)));
	CK(p11->C_GenerateRandom(sess, b, sizeof(b)));
	assert_memory_not_equal(a, z, sizeof(a));
	assert_memory_not_equal(a, b, sizeof(a));
}

/* The store's own crypto (PBKDF2 and AES-GCM of the PIN records, AES-GCM of
 * sealed objects) in a process whose default library context can fetch
 * nothing: the application asked for FIPS algorithms ("fips=yes", as a
 * FIPS-minded application does) and no FIPS provider is installed, beside
 * the ENGINE set as default. Login, a PIN change, a private key and a
 * secret key made on the token, and both read back after C_Finalize and
 * C_Initialize: all through the token's private library context. */
static void test_store(void **state)
{
	static const char pin2[] = "4321-new";
	CK_MECHANISM gen = { CKM_EC_KEY_PAIR_GEN, NULL, 0 }, m = { CKM_ECDSA_SHA256, NULL, 0 };
	CK_OBJECT_CLASS sk = CKO_SECRET_KEY, pk = CKO_PRIVATE_KEY;
	CK_KEY_TYPE aes = CKK_AES;
	uint8_t value[32], back[32];
	CK_ATTRIBUTE pt[] = { { CKA_EC_PARAMS, (void *)p256, sizeof(p256) }, { CKA_VERIFY, &yes, 1 },
			      { CKA_TOKEN, &yes, 1 }, { CKA_LABEL, "stored", 6 } };
	CK_ATTRIBUTE kt[] = { { CKA_SIGN, &yes, 1 }, { CKA_TOKEN, &yes, 1 }, { CKA_LABEL, "stored", 6 } };
	CK_ATTRIBUTE st[] = { { CKA_CLASS, &sk, sizeof(sk) }, { CKA_KEY_TYPE, &aes, sizeof(aes) },
			      { CKA_TOKEN, &yes, 1 }, { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 },
			      { CKA_VALUE, value, sizeof(value) }, { CKA_LABEL, "stored", 6 } };
	CK_ATTRIBUTE fp[] = { { CKA_CLASS, &pk, sizeof(pk) }, { CKA_LABEL, "stored", 6 } };
	CK_ATTRIBUTE fs[] = { { CKA_CLASS, &sk, sizeof(sk) }, { CKA_LABEL, "stored", 6 } };
	CK_ATTRIBUTE get = { CKA_VALUE, back, sizeof(back) };
	CK_OBJECT_HANDLE pub, priv, sec, h;
	CK_ULONG n = 0;
	EVP_CIPHER *c;

	(void)state;
	for (size_t i = 0; i < sizeof(value); i++)
		value[i] = (uint8_t)(0xa5 ^ i);
	assert_int_equal(EVP_set_default_properties(NULL, "fips=yes"), 1);
	c = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	if (c) {
		EVP_CIPHER_free(c);
		fail_msg("the default context still fetches AES-256-GCM: the test would prove nothing");
	}
	ERR_clear_error();
	CK(p11->C_Logout(sess));
	CK(p11->C_Login(sess, CKU_USER, (CK_UTF8CHAR_PTR)PIN, 4));
	CK(p11->C_SetPIN(sess, (CK_UTF8CHAR_PTR)PIN, 4, (CK_UTF8CHAR_PTR)pin2, sizeof(pin2) - 1));
	CK(p11->C_GenerateKeyPair(sess, &gen, pt, 4, kt, 3, &pub, &priv));
	CK(p11->C_CreateObject(sess, st, 7, &sec));
	CK(p11->C_CloseSession(sess));
	CK(p11->C_Finalize(NULL));

	CK(p11->C_Initialize(NULL));
	CK(p11->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess));
	assert_int_equal(p11->C_Login(sess, CKU_USER, (CK_UTF8CHAR_PTR)PIN, 4), CKR_PIN_INCORRECT);
	CK(p11->C_Login(sess, CKU_USER, (CK_UTF8CHAR_PTR)pin2, sizeof(pin2) - 1));
	CK(p11->C_FindObjectsInit(sess, fp, 2));
	CK(p11->C_FindObjects(sess, &h, 1, &n));
	CK(p11->C_FindObjectsFinal(sess));
	assert_int_equal(n, 1);
	/* The public key was made with it: the private one read back signs. */
	CK(p11->C_FindObjectsInit(sess, pt + 3, 1));
	{
		CK_OBJECT_HANDLE hs[4];
		CK_OBJECT_CLASS cls;
		CK_ATTRIBUTE ca = { CKA_CLASS, &cls, sizeof(cls) };
		CK(p11->C_FindObjects(sess, hs, 4, &n));
		CK(p11->C_FindObjectsFinal(sess));
		assert_int_equal(n, 3);
		pub = CK_INVALID_HANDLE;
		for (CK_ULONG i = 0; i < n; i++) {
			CK(p11->C_GetAttributeValue(sess, hs[i], &ca, 1));
			if (cls == CKO_PUBLIC_KEY)
				pub = hs[i];
		}
		assert_int_not_equal(pub, CK_INVALID_HANDLE);
	}
	sign_verify(&m, h, pub);
	CK(p11->C_FindObjectsInit(sess, fs, 2));
	CK(p11->C_FindObjects(sess, &h, 1, &n));
	CK(p11->C_FindObjectsFinal(sess));
	assert_int_equal(n, 1);
	CK(p11->C_GetAttributeValue(sess, h, &get, 1));
	assert_int_equal(get.ulValueLen, sizeof(value));
	assert_memory_equal(back, value, sizeof(value));
	assert_int_equal(EVP_set_default_properties(NULL, ""), 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ec),
		cmocka_unit_test(test_ec_import),
		cmocka_unit_test(test_rsa),
		cmocka_unit_test(test_wrap_private),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_store), /* last: it changes the default context */
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s libsofttoken.so\n", argv[0]);
		return 2;
	}
	module_path = argv[1];
	return cmocka_run_group_tests(tests, setup, teardown);
}
